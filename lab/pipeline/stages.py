"""Each stage's compute as the runtime runs it: the schedule's actions timed on one process.

:func:`profile_stages` runs every rank's actions of the schedule in their order on this
process, with no communication and no waiting (the probe
:func:`backends.pipeline.measure.stage_programs`); :func:`profile_stages_together` adds each
stage's CPU time while one copy per stage runs at once (the rank program
:func:`backends.pipeline.measure.stages_together_rank`); :func:`stage_profile` joins those
times to the per-layer profile's bytes.

Units: seconds, bytes.
"""

from __future__ import annotations

from dataclasses import replace

from lab.pipeline.experiment import PipelineSetup
from simulator.pipeline.profile import LayerProfile


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

    from backends.pipeline.measure import stage_medians, stage_programs

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run = stage_programs(setup)
        samples = []
        for rank in range(setup.stages):
            for step in range(repeats + 1):
                timed = run(rank)
                if step:
                    samples += timed
    finally:
        torch.set_num_threads(threads)
    medians = stage_medians(samples)
    return [LayerProfile(f"stage{k}", medians[(k, "F")], medians[(k, "B")], 0, 0)
            for k in range(setup.virtual_stages)]


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
    from backends.pipeline.measure import stages_together_rank

    alone = profile_stages(setup)
    k = processes or setup.stages
    if k == 1:
        return alone
    together: dict[tuple[int, str], float] = {}
    for part in spawn(stages_together_rank, k, setup, seconds, timeout=120):
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
