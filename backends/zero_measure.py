"""The rank programs of the ZeRO twin's measurements (book chapter 14), spawned one per process
by :mod:`lab.zero` (``backends.launch.spawn``):

* :func:`time_stages` — the real :class:`backends.zero.Zero` training step at each stage:
  the slowest rank's seconds per step, the model-state bytes this rank holds, and its peak
  memory over one step (:func:`step_peak_bytes`), bytes;
* :func:`adam_together` — a primitive: every rank steps Adam over the same number of
  parameters at the same moment (the ranks share the host's memory bandwidth), s;
* :func:`traced_step` — one step's timeline in the simulator's trace schema
  (:class:`backends.trace.Tracer`): ``compute`` spans ``forward i``, ``backward i`` and
  ``optimizer step`` as :func:`simulator.zero.zero_step` names them, and the collectives'
  spans that :class:`~backends.zero.Zero` and its ring record;
* :func:`slowest_rank_times` — the timing both use: barrier, run, the slowest rank's seconds.

**How the peak is measured** (:func:`step_peak_bytes`): what the rank keeps between steps is
counted from live storages (:meth:`Zero.held_bytes`: parameters, gradients, optimizer state,
flat buffers, each storage once); what the step allocates on top is read from the allocator
itself — ``torch.profiler`` with ``profile_memory=True`` records every allocation and free of
the CPU allocator during one step, in order, and their running sum's maximum is the step's
highest extra: activations saved for backward, gathered units, fresh gradients, the
optimizer's temporaries, and anything else the step allocates, whether a model predicts it or
not. The collectives' kept receive buffers (:func:`backends.collectives.comm.scratch`), the
input batch and the process group's own memory are allocated before the step and not counted.
The measured step runs with oneDNN off: on a CPU with bf16 matrix units (AMX) oneDNN's bf16
matmuls allocate a workspace of their own (34 KB a step for the FSDP test's MLP), memory of the
kernel library and not of the algorithm, which no memory model here prices; timed steps keep
the default kernels. On a GPU (:func:`backends.device.device`) the CUDA allocator keeps the
peak itself: ``torch.cuda.max_memory_allocated`` over the step, which counts every live CUDA
tensor of the rank, the kept buffers and the batch included.
"""

from __future__ import annotations

import copy
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, profile

from backends.device import (
    device,
    peak_memory_bytes,
    reset_peak_memory,
    synchronize,
    synchronizer,
)
from backends.trace import Tracer
from backends.zero import Zero


def slowest_rank_times(fn: Callable[[], Any], repeats: int, warmup: int = 2) -> list[float]:
    """Rank program piece: every rank runs ``fn`` at the same moment (a barrier first); the
    slowest rank's seconds of each repeat after the warm-ups (the step ends with it)."""
    samples, settle = [], synchronizer()
    for k in range(warmup + repeats):
        dist.barrier()
        settle()
        start = time.perf_counter()
        fn()
        settle()
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64,
                               device=device())
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if k >= warmup:
            samples.append(float(elapsed))
    return samples


def adam_together(numel: int, repeats: int) -> float:
    """Rank program: every rank steps Adam over ``numel`` parameters at the same moment; the
    median over repeats of the slowest rank's time, s."""
    param = nn.Parameter(torch.zeros(max(numel, 1), device=device()))
    param.grad = torch.randn_like(param)
    opt = torch.optim.Adam([param], lr=1e-3)
    return statistics.median(slowest_rank_times(opt.step, repeats))


@contextmanager
def _native_stderr_to_null() -> Iterator[None]:
    """File descriptor 2 pointed at ``/dev/null`` for the ``with`` block: the profiler's C++
    side logs its every start and stop there, which would bury the lab's own progress lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def step_peak_bytes(zero: Zero, step: Callable[[], Any]) -> int:
    """The most bytes this rank holds during one ``step()`` of ``zero``: what it keeps
    (:meth:`Zero.held_bytes`, live storages) plus the highest running sum of the CPU
    allocator's allocations and frees during the step (``torch.profiler``, see the module
    docstring). Run it on a step in steady state (after the first, which allocates the
    optimizer state). On CUDA: the allocator's own peak over the step, B."""
    if device().type == "cuda":
        synchronize()
        reset_peak_memory()
        step()
        synchronize()
        return peak_memory_bytes() or 0
    held = zero.held_bytes()
    with _native_stderr_to_null(), torch.backends.mkldnn.flags(enabled=False), \
            profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    assert prof.profiler is not None and prof.profiler.kineto_results is not None
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    live = extra = 0
    for event in events:
        live += event.nbytes()
        extra = max(extra, live)
    return held + extra


def _batch(features: tuple[int, int], batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's inputs and targets: ``batch`` rows, seeded by the rank."""
    g = torch.Generator().manual_seed(dist.get_rank())
    return (torch.randn(batch, features[0], generator=g).to(device()),
            torch.randn(batch, features[1], generator=g).to(device()))


def _train_step(zero: Zero, x: torch.Tensor, y: torch.Tensor) -> None:
    """One step: mean squared error, backward, the optimizer."""
    zero.zero_grad()
    ((zero(x) - y) ** 2).mean().backward()
    zero.step()


def time_stages(stages: tuple[int, ...], model: nn.Module, features: tuple[int, int],
                batch: int, repeats: int) -> dict[int, dict[str, Any]]:
    """Rank program: for each stage, ``model`` (a copy) trained with Adam on a batch of
    ``batch`` rows of ``features[0]`` inputs and ``features[1]`` targets (mean squared error):
    ``repeats`` timed steps after 2 warm-ups — the slowest rank's seconds of each — then the
    model-state bytes this rank holds and its peak bytes over one more step
    (:func:`step_peak_bytes`)."""
    x, y = _batch(features, batch)
    out = {}
    for stage in stages:
        zero = Zero(copy.deepcopy(model), torch.optim.Adam, stage=stage, lr=1e-3)

        def step(zero: Zero = zero) -> None:
            _train_step(zero, x, y)

        out[stage] = {"samples_s": slowest_rank_times(step, repeats),
                      "model_states": zero.model_states(),
                      "peak_bytes": step_peak_bytes(zero, step)}
        del zero
    return out


def traced_step(stage: int, model: nn.Module, features: tuple[int, int], batch: int
                ) -> list[dict[str, Any]]:
    """Rank program: one step of ``model`` (a copy) at ZeRO ``stage`` after an untraced
    warm-up, traced: each unit's forward and backward (module hooks) and the optimizer's
    step (its step hooks) as ``compute`` spans, the collectives as :class:`Zero` records
    them. Every rank's spans (:meth:`Tracer.gather`, ``perf_counter`` seconds) as records."""
    tracer = Tracer(enabled=False)
    zero = Zero(copy.deepcopy(model), torch.optim.Adam, stage=stage, tracer=tracer, lr=1e-3)
    x, y = _batch(features, batch)
    _train_step(zero, x, y)
    started: dict[str, float] = {}

    def begin(name: str) -> Callable[..., None]:
        return lambda *_: started.__setitem__(name, time.perf_counter())

    def end(name: str) -> Callable[..., None]:
        return lambda *_: tracer.trace.record(tracer.rank, "compute", name, started[name],
                                              time.perf_counter())

    for unit in zero.units:
        forward, backward = f"forward {unit.index}", f"backward {unit.index}"
        unit.module.register_forward_pre_hook(begin(forward))
        unit.module.register_forward_hook(end(forward))
        unit.module.register_full_backward_pre_hook(begin(backward))
        unit.module.register_full_backward_hook(end(backward))
    zero.optimizer.register_step_pre_hook(begin("optimizer step"))
    zero.optimizer.register_step_post_hook(end("optimizer step"))
    dist.barrier()
    tracer.enabled = True
    # The first unit's input needs no gradient, so PyTorch warns that its backward hook fires
    # once its output's gradient is in: the end of its backward, as the span wants.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Full backward hook", UserWarning)
        _train_step(zero, x, y)
    tracer.enabled = False
    return tracer.gather().to_records()
