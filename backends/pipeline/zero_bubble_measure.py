"""Rank programs that profile and time the zero-bubble pipelines (book chapter 23).

* :func:`stage_costs` is the one-process profile the prediction reads: each stage's ``F``,
  ``I`` and ``W`` of one micro-batch, run as :class:`~backends.pipeline.zero_bubble.
  ZeroBubblePipeline` runs them (the same input-gradient / weight-gradient split), timed
  alone on this process; and the bytes each stage keeps and sends.
* :func:`stage_costs_rank` takes that profile in several copies at once;
* :func:`measure_rank` times steps of our runtime on ``world`` processes (and, where PyTorch
  defines the schedule at that size, of PyTorch's, interleaved in the same rounds), then
  reports this rank's peak activation bytes and the predicted peak of its action list.

An experiment reaches them as a :class:`ZeroBubbleSpec` (:class:`lab.zero_bubble.
ZeroBubbleSetup` is one). Units: seconds, bytes.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn

from backends.device import device
from backends.measure import measure_many
from backends.pipeline.microbatch import loss_weights, split
from backends.pipeline.partition import partition
from backends.pipeline.zero_bubble import (
    ZeroBubblePipeline,
    backward_input,
    backward_weight,
    forward_capturing,
    stage_saved_bytes,
    weight_layers,
)
from backends.pipeline.zero_bubble_builtin import BuiltinZeroBubble, supported
from backends.trace import Tracer
from simulator.pipeline.schedules.split_backward import peak_activation_bytes


class ZeroBubbleSpec(Protocol):
    """One experiment: ``stages`` ranks, ``microbatches`` of a ``batch``, a ``schedule``
    (``zb_h1``, ``zbv``, ``dualpipev``) and layers per stage ``balance``; ``build()`` returns
    (model, inputs, targets), the same on every rank."""

    @property
    def stages(self) -> int: ...
    @property
    def microbatches(self) -> int: ...
    @property
    def batch(self) -> int: ...
    @property
    def schedule(self) -> str: ...
    @property
    def balance(self) -> tuple[int, ...]: ...
    def build(self) -> tuple[Any, Any, Any]: ...


def stage_costs(spec: ZeroBubbleSpec, repeats: int = 10) -> list[dict[str, float]]:
    """Per stage: median ``forward_s``, ``input_s``, ``weight_s`` of one micro-batch on this
    process (one thread, as a rank runs), ``activation_bytes`` and ``output_bytes``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, x, t = spec.build()
        parts = partition(model, spec.balance)
        h = split(x, spec.microbatches)[0].to(device())
        target = split(t, spec.microbatches)[0].to(device())
        weight = loss_weights(spec.batch, spec.microbatches)[0]
        last = len(parts) - 1
        costs = []
        for k, part in enumerate(parts):
            layers = weight_layers(part)
            samples: dict[str, list[float]] = {"F": [], "I": [], "W": []}
            for _ in range(repeats + 1):  # the first round warms up
                xin = h.detach().requires_grad_(k > 0)
                start = time.perf_counter()
                y, outs = forward_capturing(part, layers, xin)
                if k == last:
                    y = nn.functional.mse_loss(y, target) * weight
                mid = time.perf_counter()
                grad = None if k == last else torch.ones_like(y)
                _, grads = backward_input(y, grad, xin, outs)
                end_i = time.perf_counter()
                backward_weight(layers, outs, grads)
                end_w = time.perf_counter()
                for kind, dt in (("F", mid - start), ("I", end_i - mid), ("W", end_w - end_i)):
                    samples[kind].append(dt)
            with torch.no_grad():
                out = part(h)
            costs.append({"forward_s": statistics.median(samples["F"][1:]),
                          "input_s": statistics.median(samples["I"][1:]),
                          "weight_s": statistics.median(samples["W"][1:]),
                          "activation_bytes": stage_saved_bytes(
                              part, h, k > 0, nn.functional.mse_loss if k == last else None),
                          "output_bytes": out.numel() * out.element_size()})
            h = out
        return costs
    finally:
        torch.set_num_threads(threads)


def stage_costs_rank(spec: ZeroBubbleSpec, repeats: int) -> list[dict[str, float]]:
    """Rank function: :func:`stage_costs` in every copy at once, after a barrier — the
    one-process profile taken while the other copies share the host's caches and memory
    bandwidth, as the pipeline's ranks will."""
    dist.barrier()
    return stage_costs(spec, repeats)


def measure_rank(spec: ZeroBubbleSpec, repeats: int, builtin: bool) -> dict[str, Any]:
    """Rank function: time ``repeats`` steps of our pipeline (and PyTorch's, interleaved,
    when ``builtin`` and PyTorch defines the schedule here); return the timings, this rank's
    measured and predicted peak activation bytes, the loss, and — from one traced step after
    a barrier — its wall time ``step_s`` and the seconds it computed ``busy_s`` (F, I, W)."""
    model, x, t = spec.build()
    tracer = Tracer(enabled=False)
    pipe = ZeroBubblePipeline(model, spec.balance, spec.microbatches, spec.schedule, x,
                              tracer=tracer)
    first, last = 0 in pipe.modules, pipe.last in pipe.modules
    inputs, target = (x if first else None), (t if last else None)
    steps = [lambda: pipe.step(inputs, target)]
    use_builtin = builtin and supported(spec.schedule, spec.stages, spec.microbatches)
    if use_builtin:
        twin, _, _ = spec.build()
        ref = BuiltinZeroBubble(partition(twin, spec.balance), dist.get_rank(), spec.stages,
                                spec.microbatches, spec.schedule)
        steps.append(lambda: ref.step(inputs, target))
    timings = measure_many(steps, repeats=repeats, warmup=2, inner=1)
    tracer.enabled = True
    dist.barrier()
    start = time.perf_counter()
    loss = pipe.step(inputs, target)
    step_s = time.perf_counter() - start
    busy_s = sum(sp.end - sp.start for sp in tracer.trace.spans if sp.kind == "compute")
    return {"timing": timings[0].as_dict(),
            "builtin": timings[1].as_dict() if use_builtin else None,
            "peak_activation_bytes": pipe.peak_activation_bytes,
            "predicted_peak_activation_bytes": peak_activation_bytes(
                pipe.actions, pipe.rank, pipe.p, pipe.activation_bytes, pipe.placement),
            "loss": loss, "busy_s": busy_s, "step_s": step_s}
