"""Rank programs that time a pipeline on real processes (book ch. 8–11).

* :func:`measure_rank` times steps of our runtime (:class:`backends.pipeline.runtime.Pipeline`:
  GPipe, 1F1B, interleaved) and — for GPipe and 1F1B — of ``torch.distributed.pipelining``
  (:class:`backends.pipeline.builtin.BuiltinPipeline`) on the same split, interleaved in the
  same rounds, then records one traced step and the peak activation bytes of its stage;
  :func:`measure_sweep_rank` does so for several experiments in one launch.
* :func:`stage_programs` is the per-stage probe: every rank's actions of the schedule run on
  ONE process with no communication and no waiting, each timed; :func:`stages_together_rank`
  runs it with one copy per stage at once, for the stages' CPU time while they share the
  host's caches and memory bandwidth.

An experiment reaches them as a :class:`PipelineSpec` (:class:`lab.pipeline.PipelineSetup` is
one), whose ``build()`` makes the same model and data on every rank.

Units: seconds, bytes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn

from backends.device import device
from backends.measure import measure_many
from backends.pipeline.builtin import BuiltinPipeline, supported
from backends.pipeline.memory import ActivationCounter
from backends.pipeline.microbatch import loss_weights, split
from backends.pipeline.partition import partition
from backends.pipeline.runtime import Pipeline, build_schedule
from backends.trace import Tracer


class PipelineSpec(Protocol):
    """One pipeline experiment as the rank programs read it: ``stages`` ranks with ``chunks``
    model chunks each (interleaved only), ``microbatches`` per mini-batch of ``batch``
    examples, a ``schedule`` (``gpipe``, ``1f1b``, ``interleaved``), a ``checkpoint`` mode,
    layers per (virtual) stage ``balance`` and a ``seed``; ``build()`` returns (model, inputs,
    targets), the same on every rank."""

    @property
    def stages(self) -> int: ...
    @property
    def chunks(self) -> int: ...
    @property
    def microbatches(self) -> int: ...
    @property
    def batch(self) -> int: ...
    @property
    def schedule(self) -> str: ...
    @property
    def checkpoint(self) -> str: ...
    @property
    def balance(self) -> tuple[int, ...] | None: ...
    @property
    def seed(self) -> int: ...
    def build(self) -> tuple[Any, Any, Any]: ...


def measure_rank(setup: PipelineSpec, repeats: int, builtin: bool,
                 host_busy_s: Callable[[], float]) -> dict[str, Any]:
    """Rank function: time ``repeats`` steps of our pipeline (and PyTorch's, interleaved),
    then one traced step; return timings, the peak activation bytes and the trace.

    ``host_busy_s()`` is the CPU seconds the whole host has been busy (``/proc/stat``; NaN
    where unknown): its growth over the timed steps, less the CPU seconds all ranks spent, is
    ``foreign_cpu_s`` — what other programs used meanwhile (``None`` where unknown);
    ``window_s`` is the wall time of the timed steps.
    """
    assert setup.balance is not None
    model, x, t = setup.build()
    tracer = Tracer(enabled=False)
    pipe = Pipeline(model, setup.balance, setup.microbatches, setup.schedule, setup.chunks,
                    setup.checkpoint, tracer=tracer)
    first, last = 0 in pipe.modules, pipe.last in pipe.modules
    inputs, target = (x if first else None), (t if last else None)
    steps = [lambda: pipe.step(inputs, target)]
    use_builtin = (builtin and setup.chunks == 1
                   and supported(setup.schedule, setup.stages, setup.microbatches))
    if use_builtin:
        twin_model, _, _ = setup.build()
        rank = dist.get_rank()
        ref = BuiltinPipeline(partition(twin_model, setup.balance)[rank], rank, setup.stages,
                              setup.microbatches, setup.schedule)
        steps.append(lambda: ref.step(inputs, target))
    busy_before, cpu_before, wall = host_busy_s(), time.process_time(), time.perf_counter()
    timings = measure_many(steps, repeats=repeats, warmup=2, inner=1)
    own = torch.tensor([time.process_time() - cpu_before], dtype=torch.float64, device=device())
    dist.all_reduce(own)  # CPU seconds all ranks spent, every thread counted
    busy, wall = host_busy_s() - busy_before, time.perf_counter() - wall
    tracer.enabled = True
    tracer.trace.spans.clear()
    dist.barrier()
    loss = pipe.step(inputs, target)
    return {"timing": timings[0].as_dict(),
            "builtin": timings[1].as_dict() if use_builtin else None,
            "peak_activation_bytes": pipe.peak_activation_bytes, "loss": loss,
            "foreign_cpu_s": max(busy - float(own), 0.0) if busy == busy else None,
            "window_s": wall,
            "trace": tracer.gather().to_records()}


def measure_sweep_rank(setups: list[PipelineSpec], repeats: int, builtin: bool,
                       host_busy_s: Callable[[], float]) -> list[dict[str, Any]]:
    """Rank function: :func:`measure_rank` for several setups of one stage count in turn."""
    return [measure_rank(setup, repeats, builtin, host_busy_s) for setup in setups]


def stage_programs(setup: PipelineSpec, clock: Callable[[], float] = time.perf_counter
                   ) -> Callable[[int], list[tuple[int, str, float]]]:
    """``run(rank)``: one step of ``rank``'s actions of ``setup``'s schedule, on this process,
    with no communication and no waiting; returns ``[(stage, kind, seconds), …]`` timed by
    ``clock`` (wall time; ``time.thread_time``: this thread's CPU time).

    A stage's input comes from running the stages before it once; its output gradient is
    random. Saved tensors are counted as the runtime counts them
    (:class:`backends.pipeline.memory.ActivationCounter`), so the per-call costs are the
    runtime's.
    """
    if setup.balance is None:
        raise ValueError("a stage profile needs an explicit balance")
    model, x, t = setup.build()
    parts = partition(model, setup.balance)
    counter = ActivationCounter(model.parameters())  # the runtime counts saved tensors too
    weights = loss_weights(setup.batch, setup.microbatches)
    micro_targets = split(t, setup.microbatches)
    last = len(parts) - 1
    inputs: dict[int, list[Any]] = {0: split(x, setup.microbatches)}
    grads: dict[int, list[Any]] = {}
    gen = torch.Generator().manual_seed(setup.seed + 2)
    with torch.no_grad():
        for k, part in enumerate(parts):
            outs = [part(h) for h in inputs[k]]
            if k < last:
                inputs[k + 1] = outs
                grads[k] = [torch.randn(o.shape, generator=gen) for o in outs]
    schedule = build_schedule(setup.schedule, setup.stages, setup.microbatches, setup.chunks)

    def run(rank: int) -> list[tuple[int, str, float]]:
        saved: dict[tuple[int, int], Any] = {}
        out = []
        for a in schedule[rank]:
            k, i = a.chunk * setup.stages + rank, a.microbatch
            start = clock()
            if a.kind == "F":
                with counter.count():
                    y = parts[k](inputs[k][i].detach().requires_grad_(k > 0))
                if k == last:
                    y = nn.functional.mse_loss(y, micro_targets[i]) * weights[i]
                    float(y.detach())
                saved[(k, i)] = y
            else:
                torch.autograd.backward(saved.pop((k, i)),
                                        grad_tensors=None if k == last else grads[k][i])
            out.append((k, a.kind, clock() - start))
        return out

    return run


def stage_medians(samples: list[tuple[int, str, float]]) -> dict[tuple[int, str], float]:
    """The median seconds per (stage, kind) of :func:`stage_programs`' samples."""
    times: dict[tuple[int, str], list[float]] = {}
    for k, kind, dt in samples:
        times.setdefault((k, kind), []).append(dt)
    return {key: statistics.median(v) for key, v in times.items()}


def stages_together_rank(setup: PipelineSpec, seconds: float) -> dict[tuple[int, str], float]:
    """Rank function: copy ``c`` of ``k`` runs the actions of ranks ``c, c + k, …`` of
    :func:`stage_programs` in turn, for ``seconds`` after a barrier; median CPU seconds
    (``time.thread_time``) per stage and kind."""
    torch.set_num_threads(1)
    run = stage_programs(setup, time.thread_time)
    c, k = dist.get_rank(), dist.get_world_size()
    mine = list(range(c, setup.stages, k))
    for rank in mine:  # warm up
        run(rank)
    dist.barrier()
    samples, stop = [], time.perf_counter() + seconds
    while time.perf_counter() < stop:
        for rank in mine:
            samples += run(rank)
    return stage_medians(samples)
