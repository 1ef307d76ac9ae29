"""Each stage's compute as the runtime runs it: the schedule's actions timed on one process.

:func:`profile_stages` runs every rank's actions of the schedule in their order on this
process, with no communication and no waiting; :func:`profile_stages_together` adds each
stage's CPU time while one copy per stage runs at once; :func:`stage_profile` joins those
times to the per-layer profile's bytes.

Units: seconds, bytes.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, replace
from typing import Any

from lab.pipeline.experiment import PipelineSetup
from simulator.pipeline.profile import LayerProfile


def _stage_programs(setup: PipelineSetup, clock: Any = time.perf_counter) -> Any:
    """``run(rank)``: one step of ``rank``'s actions of ``setup``'s schedule, on this process,
    with no communication and no waiting; returns ``[(stage, kind, seconds), …]`` timed by
    ``clock`` (wall time; ``time.thread_time``: this thread's CPU time)."""
    import torch
    from torch import nn

    from backends.pipeline.memory import ActivationCounter
    from backends.pipeline.microbatch import loss_weights, split
    from backends.pipeline.partition import partition
    from backends.pipeline.runtime import build_schedule

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


def _stage_medians(samples: list[tuple[int, str, float]]) -> dict[tuple[int, str], float]:
    times: dict[tuple[int, str], list[float]] = {}
    for k, kind, dt in samples:
        times.setdefault((k, kind), []).append(dt)
    return {key: statistics.median(v) for key, v in times.items()}


def profile_stages(setup: PipelineSetup, repeats: int = 5) -> list[LayerProfile]:
    """Each (virtual) stage's compute as the runtime runs it, on this ONE process: one
    :class:`~simulator.pipeline.profile.LayerProfile` per stage of ``setup.balance``.

    The per-layer profile (:func:`profile`) times layers inside one whole-model iteration and
    adds them up; a stage of the runtime is one forward call on a received input that requires
    a gradient (plus the loss on the last stage) and one ``autograd.backward`` of its own
    (:class:`backends.pipeline.runtime.Pipeline`) — per-call costs the layer sum misses. Here
    every rank's actions of the schedule run in their order on this process, with no
    communication and no waiting (saved tensors counted as the runtime counts them), so a
    forward after a backward finds the caches as the rank
    leaves them (1F1B alternates the two; GPipe runs all forwards, then all backwards).
    ``forward_s``/``backward_s``: median over micro-batches and ``repeats`` steps (after one
    warm-up), s. Bytes are 0: :func:`stage_profile` adds them from the per-layer profile.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run = _stage_programs(setup)
        samples = []
        for rank in range(setup.stages):
            for step in range(repeats + 1):
                timed = run(rank)
                if step:
                    samples += timed
    finally:
        torch.set_num_threads(threads)
    medians = _stage_medians(samples)
    return [LayerProfile(f"stage{k}", medians[(k, "F")], medians[(k, "B")], 0, 0)
            for k in range(setup.virtual_stages)]


def stages_together_rank(setup_fields: dict[str, Any], seconds: float
                         ) -> dict[tuple[int, str], float]:
    """Rank function of :func:`profile_stages_together`: copy ``c`` of ``k`` runs the actions
    of ranks ``c, c + k, …`` in turn, for ``seconds`` after a barrier; median CPU seconds
    (``time.thread_time``) per stage and kind."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    setup = PipelineSetup(**setup_fields)
    run = _stage_programs(setup, time.thread_time)
    c, k = dist.get_rank(), dist.get_world_size()
    mine = list(range(c, setup.stages, k))
    for rank in mine:  # warm up
        run(rank)
    dist.barrier()
    samples, stop = [], time.perf_counter() + seconds
    while time.perf_counter() < stop:
        for rank in mine:
            samples += run(rank)
    return _stage_medians(samples)


def profile_stages_together(setup: PipelineSetup, seconds: float = 1.5,
                            processes: int | None = None) -> list[LayerProfile]:
    """:func:`profile_stages` with the ``forward_together_s``/``backward_together_s`` of each
    stage: the CPU time its compute costs while ``processes`` copies (default: one per
    stage, as many processes as the pipeline runs) run the stages' actions at the same
    moment — a primitive of the machine, like an optimizer step timed with every rank
    stepping at once (:func:`lab.zero.optimizer_step_together_s`): the copies share the
    last-level cache and the memory bandwidth, and with more processes than cores the
    operating system time-slices them, so each slice starts with caches the others left
    behind. CPU time, not wall time: waiting for a core is the simulator's processor sharing
    (``cores=``), what the waiting costs in cache misses is in here. No communication and no
    pipeline dependencies are in it."""
    from backends.launch import spawn

    alone = profile_stages(setup)
    k = processes or setup.stages
    if k == 1:
        return alone
    together: dict[tuple[int, str], float] = {}
    for part in spawn(stages_together_rank, k, asdict(setup), seconds, timeout=120):
        together.update(part)
    return [replace(x, forward_together_s=together[(j, "F")],
                    backward_together_s=together[(j, "B")]) for j, x in enumerate(alone)]


def stage_profile(layer_profile: list[LayerProfile], balance: tuple[int, ...],
                  stage_times: list[LayerProfile]) -> list[LayerProfile]:
    """One entry per stage: the times of :func:`profile_stages`, the bytes summed from the
    per-layer profile (activations and parameters add up over a stage's layers; its output
    is its last layer's)."""
    from simulator.pipeline.profile import stage_profiles

    return [replace(timed, activation_bytes=sum(x.activation_bytes for x in layers),
                    parameter_bytes=sum(x.parameter_bytes for x in layers),
                    output_bytes=layers[-1].out_bytes)
            for timed, layers in zip(stage_times, stage_profiles(layer_profile, balance),
                                     strict=True)]
