"""RPC model parallelism predicted and measured, side by side (book chapter 13).

* :func:`calibrate_rpc` — the RPC transport's α and bandwidth from an echo sweep (``rpc_sync``
  of a function that returns its tensor argument, :func:`backends.rpc_measure.echo_sweep`): a
  primitive, like the process group's ping-pong, measured in one launch and never on the
  training it predicts;
* :func:`profile_stages` — each stage's forward, backward and SGD step, measured on ONE process
  with one thread (:func:`backends.pipeline.profiler.profile_layers`);
* :func:`predict_split_step` — :func:`simulator.rpc.simulate_split_step` on a fully connected
  cluster with the RPC α and bandwidth;
* :func:`measure_split_step` — :func:`backends.rpc.train_split` timed on real processes
  (:func:`backends.rpc_measure.train_timed`).

Seconds and bytes throughout.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from functools import partial
from typing import Any

import torch
from torch import nn

from backends.launch import spawn
from backends.measure import median_time
from backends.pipeline.profiler import profile_layers
from backends.rpc_measure import echo_sweep, train_timed
from lab.models import mlp
from simulator.core.calibration import Fit, fit_alpha_beta
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.rpc import StageCost, simulate_split_step

ECHO_SIZES = (16, 1024, 16 * 1024, 128 * 1024, 1024 * 1024, 4 * 1024 * 1024)
IDLE_S = 0.002
"""Quiet time before each calibration echo, s (see :func:`calibrate_rpc`)."""


def calibrate_rpc(sizes: Sequence[int] = ECHO_SIZES, repeats: int = 20,
                  idle_s: float = IDLE_S, world: int = 2) -> Fit:
    """α and β of one RPC message (request or response) on this machine.

    Each echo starts after ``idle_s`` of quiet, as an RPC in a training step does: the
    receiving worker has been idle while the other stages computed, so its agent's threads
    have gone to sleep and must be woken. Back-to-back echoes (``idle_s=0``) keep them
    spinning and measure a latency no step sees. ``world`` processes run RPC agents while
    ranks 0 and 1 echo — as many as the run being predicted, since on a small host every
    agent's threads compete for the cores.
    """
    if world < 2:
        raise ValueError(f"an RPC echo needs at least 2 processes, got {world}")
    times = spawn(echo_sweep, world, list(sizes), repeats, idle_s, timeout=60)[0]
    return fit_alpha_beta([4 * max(n // 4, 1) for n in sizes], times)


def stage_module(widths: tuple[int, ...], stages: int, index: int) -> nn.Module:
    """Stage ``index`` of :func:`mlp` cut into ``stages`` runs of whole layers (built on the
    worker from the seeded whole model, so the split equals the whole)."""
    layers = list(mlp(widths).children())
    n = len(widths) - 1
    cuts = [round(i * n / stages) for i in range(stages + 1)]
    lo, hi = 2 * cuts[index], min(2 * cuts[index + 1], len(layers))
    return nn.Sequential(*layers[lo:hi])


def _sgd_step_s(module: nn.Module, repeats: int) -> float:
    params = [p for p in module.parameters()]
    for p in params:
        p.grad = torch.zeros_like(p)
    opt = torch.optim.SGD(params, lr=0.01)
    return median_time(opt.step, repeats)


def profile_stages(widths: tuple[int, ...], stages: int, batch: int, repeats: int = 10
                   ) -> list[StageCost]:
    """One-process, one-thread costs of each stage for a batch of ``batch`` rows."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = []
        x = torch.randn(batch, widths[0])
        for i in range(stages):
            module = stage_module(widths, stages, i)
            assert isinstance(module, nn.Sequential)
            layers = profile_layers(module, x, repeats=repeats)
            with torch.no_grad():
                y = module(x)
            out.append(StageCost(sum(layer.forward_s for layer in layers),
                                 sum(layer.backward_s for layer in layers),
                                 _sgd_step_s(module, repeats), x.nbytes, y.nbytes))
            x = y
        return out
    finally:
        torch.set_num_threads(threads)


def rpc_cluster(world: int, fit: Fit) -> Cluster:
    """``world`` processes, every pair joined by the RPC transport's fitted link.

    Not a calibration-entry cluster, so not one of
    :func:`simulator.host.factory.local_cluster`'s: its α and B are the RPC transport's own
    (``fit``, timed through ``torch.distributed.rpc``, whose messages do not take gloo's
    path), and a textbook fully connected network is all the chapter models — no shared bus,
    no host effects."""
    device = Device("cpu-process", 1e11, 1e10, float("inf"))
    link = Link(fit.alpha_s, fit.bandwidth_Bps, "none")
    return Cluster.homogeneous("rpc-local", device, Topology.fully_connected(world, link))


def predict_split_step(stages: Sequence[StageCost], fit: Fit) -> float:
    """Predicted seconds of one training step of the split model (driver + a worker per
    stage)."""
    return simulate_split_step(rpc_cluster(len(stages) + 1, fit), stages).makespan_s


def measure_split_step(widths: tuple[int, ...], stages: int, batch: int, repeats: int = 10
                       ) -> dict[str, Any]:
    """Median/p10/p90 seconds of one real training step on ``stages + 1`` processes
    (:func:`backends.rpc_measure.train_timed`: rank 0 drives, worker ``i + 1`` holds stage
    ``i`` of :func:`stage_module`)."""
    factories = [partial(stage_module, widths, stages, i) for i in range(stages)]
    samples = sorted(spawn(train_timed, stages + 1, factories, widths, batch, repeats,
                           timeout=60)[0])
    n = len(samples)
    return {"median_s": statistics.median(samples), "p10_s": samples[int(0.1 * n)],
            "p90_s": samples[min(n - 1, int(0.9 * n))]}
