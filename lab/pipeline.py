"""A pipeline step measured and predicted, side by side (book ch. 8–11).

:class:`PipelineSetup` names one experiment: a model (:func:`backends.pipeline.models.mlp`),
a mini-batch, the number of stages, micro-batches, schedule and checkpoint mode. Then

* :func:`profile` measures the model's per-layer costs on ONE process
  (:func:`backends.pipeline.profiler.profile_layers`) at the micro-batch size;
* :func:`predict` hands that profile to the simulated twin
  (:func:`simulator.pipeline.simulate.simulate_pipeline`) on this machine's calibrated
  cluster (:func:`~simulator.host.local_host_cluster`), with the host's CPU cores shared by
  the stage processes (``cores``) — on a 2-core laptop, 3 or 4 stages computing at once get
  ``2/3`` or ``1/2`` of a core each;
* :func:`measure` runs the real twin (:class:`backends.pipeline.runtime.Pipeline`) on real
  processes, times steps (median, p10/p90 of the slowest rank), records one traced step and
  the peak activation bytes per stage — and, for GPipe and 1F1B, times
  ``torch.distributed.pipelining`` on the same split, interleaved in the same rounds;
* :func:`side_by_side` does all three and computes the relative errors.

Nothing of the measured pipeline feeds the prediction: only the one-process profile and the
calibrated primitives do.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.host import local_host_cluster
from simulator.pipeline.balance import balance_by_time
from simulator.pipeline.profile import LayerProfile
from simulator.pipeline.simulate import PipelineResult, simulate_pipeline


@dataclass(frozen=True)
class PipelineSetup:
    """One pipeline experiment.

    Attributes:
        layers, width, hidden: the MLP (``layers`` blocks ``width → hidden → width``);
            ``hiddens``, if given, one hidden width per block instead (an uneven model).
        batch: examples per mini-batch; ``microbatches`` splits it.
        stages: pipeline ranks; ``chunks``: model chunks per rank (interleaved only).
        schedule: ``gpipe``, ``1f1b`` or ``interleaved``.
        checkpoint: ``never``, ``except_last`` or ``always``.
        balance: layers per (virtual) stage; ``None``: torchgpipe's balance by time on the
            profile.
        seed: model and data seed.
    """

    layers: int = 8
    width: int = 256
    hidden: int = 1024
    hiddens: tuple[int, ...] | None = None
    batch: int = 64
    stages: int = 2
    microbatches: int = 4
    schedule: str = "gpipe"
    checkpoint: str = "never"
    chunks: int = 1
    balance: tuple[int, ...] | None = None
    seed: int = 0

    @property
    def virtual_stages(self) -> int:
        """Stages of the model: ``stages · chunks``."""
        return self.stages * (self.chunks if self.schedule == "interleaved" else 1)

    def with_balance(self, profile: list[LayerProfile]) -> PipelineSetup:
        """This setup with an explicit balance (by time on ``profile`` if none was given)."""
        if self.balance is not None:
            return self
        return replace(self, balance=tuple(balance_by_time(profile, self.virtual_stages)))

    def build(self) -> tuple[Any, Any, Any]:
        """(model, inputs, targets), the same on every rank."""
        import torch

        from backends.pipeline.models import mlp

        model = mlp(self.layers, self.width, self.hiddens or self.hidden, seed=self.seed)
        gen = torch.Generator().manual_seed(self.seed + 1)
        x = torch.randn(self.batch, self.width, generator=gen)
        t = torch.randn(self.batch, self.width, generator=gen)
        return model, x, t


def profile(setup: PipelineSetup, repeats: int = 10) -> list[LayerProfile]:
    """Per-layer profile of ``setup``'s model at its micro-batch size, on this one process,
    single-threaded like a rank (``OMP_NUM_THREADS=1``)."""
    import torch

    from backends.pipeline.microbatch import split
    from backends.pipeline.profiler import profile_layers

    model, x, _ = setup.build()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return profile_layers(model, split(x, setup.microbatches)[0], repeats=repeats)
    finally:
        torch.set_num_threads(threads)


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


def profile_rank(setup_fields: dict[str, Any], repeats: int) -> list[LayerProfile]:
    """Rank function: :func:`profile` in every rank at once (see :func:`profile_colocated`)."""
    return profile(PipelineSetup(**setup_fields), repeats)


def profile_colocated(setup: PipelineSetup, repeats: int = 10,
                      processes: int | None = None) -> list[LayerProfile]:
    """The one-process profile, taken while ``processes`` copies of it run at once (default:
    as many as the pipeline's stages, at most the host's cores).

    Each copy still measures its layers on one process and one core; running them together
    only reproduces what a pipeline's stage processes share besides cores — the last-level
    cache and the memory bandwidth — as calibration measures compute rates with every rank
    running. Oversubscribed *cores* are not in it: the simulator shares them
    (``cores=``). Returns the per-layer median over the copies.
    """
    from backends.launch import spawn

    k = processes or max(1, min(setup.stages, host_cores()))
    if k == 1:
        return profile(setup, repeats)
    copies: list[list[LayerProfile]] = spawn(profile_rank, k, asdict(setup), repeats)
    return [replace(layers[0],
                    forward_s=statistics.median(x.forward_s for x in layers),
                    backward_s=statistics.median(x.backward_s for x in layers))
            for layers in zip(*copies, strict=True)]


def quietly(fn: Any, *args: Any) -> tuple[Any, float]:
    """``fn(*args)``, and the share of the host's CPU other programs used meanwhile (ours
    includes the CPU time of the processes ``fn`` spawned)."""
    busy, cpu, wall = host_busy_s(), time.process_time(), time.perf_counter()
    children = _children_cpu_s()
    out = fn(*args)
    busy = host_busy_s() - busy
    cpu = time.process_time() - cpu + _children_cpu_s() - children
    return out, max(busy - cpu, 0.0) / ((time.perf_counter() - wall) * host_cores())


def profile_quietly(setup: PipelineSetup, repeats: int = 10, colocated: bool = False
                    ) -> tuple[list[LayerProfile], float]:
    """:func:`profile` (or :func:`profile_colocated`), and the share of the host's CPU other
    programs used meanwhile (:func:`quietly`)."""
    return quietly(profile_colocated if colocated else profile, setup, repeats)


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children."""
    usage = os.times()
    return usage.children_user + usage.children_system


def host_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def local_cluster(stages: int, calibration: str | Path | None = None,
                  backend: str = "gloo") -> tuple[Cluster, str]:
    """This machine's calibrated cluster for ``stages`` ranks, and a description of it.

    Without a calibration entry (a fresh checkout, CI) it falls back to a *free* network
    (no latency, unbounded bandwidth), so a prediction shows compute only — and says so;
    ``distml-lab calibrate --world N`` measures the real one.
    """
    from simulator.core.calibration import CalibrationError
    from simulator.core.hardware import Cluster, Device
    from simulator.core.network import Link, Topology

    try:
        cluster = local_host_cluster(stages, backend, calibration)
        return cluster, f"calibrated cluster {cluster.name}"
    except CalibrationError:
        cpu = Device("cpu", 1e11, 1e10, math.inf)
        free = Topology.fully_connected(stages, Link(0.0, 1e18, "none"))
        return (Cluster.homogeneous("free", cpu, free),
                "free network (no calibration found: run distml-lab calibrate --world "
                f"{stages})")


def predict(setup: PipelineSetup, layer_profile: list[LayerProfile],
            calibration: str | Path | None = None, cores: float | None = None,
            backend: str = "gloo", cluster: Cluster | None = None,
            stage_times: list[LayerProfile] | None = None) -> PipelineResult:
    """The simulated step of ``setup`` on this machine's calibrated cluster (or ``cluster``).

    ``cores``: CPU cores the stage processes share (``None``: this host's; ``math.inf``: one
    core each, no contention). ``stage_times``: per-stage times (:func:`profile_stages` or
    :func:`profile_stages_together`) instead of the per-layer profile's sums; the bytes still
    come from ``layer_profile``.
    """
    if setup.stages < 2:
        raise ValueError("a pipeline needs at least 2 stages to predict")
    setup = setup.with_balance(layer_profile)
    if cluster is None:
        cluster, _ = local_cluster(setup.stages, calibration, backend)
    itemsize = 4
    input_bytes = math.ceil(setup.batch / setup.microbatches) * setup.width * itemsize
    costs, balance = layer_profile, list(setup.balance or ())
    if stage_times is not None:
        costs = stage_profile(layer_profile, tuple(balance), stage_times)
        balance = [1] * len(costs)
    return simulate_pipeline(cluster, costs, balance, setup.microbatches, setup.schedule,
                             setup.checkpoint, chunks=setup.chunks, input_bytes=input_bytes,
                             cores=host_cores() if cores is None else cores)


# ---- the real side (rank functions) ---------------------------------------------------------

def measure_rank(setup_fields: dict[str, Any], repeats: int, builtin: bool) -> dict[str, Any]:
    """Rank function: time ``repeats`` steps of our pipeline (and PyTorch's, interleaved),
    then one traced step; return timings, the peak activation bytes and the trace."""
    import torch
    import torch.distributed as dist

    from backends.measure import measure_many
    from backends.pipeline.builtin import BuiltinPipeline, supported
    from backends.pipeline.partition import partition
    from backends.pipeline.runtime import Pipeline
    from backends.trace import Tracer

    setup = PipelineSetup(**setup_fields)
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
    own = torch.tensor([time.process_time() - cpu_before], dtype=torch.float64)
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


def host_busy_s() -> float:
    """CPU seconds all cores of this host have been busy since boot (``/proc/stat``; NaN
    elsewhere). Its growth minus our ranks' own CPU time is what *other* programs used while
    we measured — on a shared machine, the noise to report beside the numbers."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return math.nan
    ticks = [int(f) for f in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def measure_sweep_rank(setups: list[dict[str, Any]], repeats: int,
                       builtin: bool) -> list[dict[str, Any]]:
    """Rank function: :func:`measure_rank` for several setups of one stage count in turn."""
    return [measure_rank(fields, repeats, builtin) for fields in setups]


def measure_sweep(setups: list[PipelineSetup], repeats: int = 10, builtin: bool = False,
                  timeout: float = 120.0) -> list[dict[str, Any]]:
    """:func:`measure` for several setups with the same number of stages, in ONE launch
    (launching costs seconds; notebooks use this)."""
    from backends.launch import spawn

    stages = {s.stages for s in setups}
    if len(stages) != 1 or any(s.balance is None for s in setups):
        raise ValueError("measure_sweep needs setups of one stage count, each with a balance")
    per_rank = spawn(measure_sweep_rank, stages.pop(), [asdict(s) for s in setups], repeats,
                     builtin, timeout=timeout)
    return [_combine([r[k] for r in per_rank]) for k in range(len(setups))]


def _combine(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One setup's result from every rank's: rank 0's timings and trace, every peak."""
    head = results[0]
    return {"timing": head["timing"], "builtin": head["builtin"],
            "peak_activation_bytes": [r["peak_activation_bytes"] for r in results],
            "loss": results[-1]["loss"], "foreign_cpu_s": head["foreign_cpu_s"],
            "window_s": head["window_s"],
            "trace": Trace.from_records(head["trace"]).shifted()}


def measure(setup: PipelineSetup, repeats: int = 10, builtin: bool = True,
            timeout: float = 120.0) -> dict[str, Any]:
    """Run ``setup`` for real on ``setup.stages`` processes (``balance`` must be set)."""
    from backends.launch import spawn

    if setup.balance is None:
        raise ValueError("measure needs an explicit balance (see PipelineSetup.with_balance)")
    return _combine(spawn(measure_rank, setup.stages, asdict(setup), repeats, builtin,
                          timeout=timeout))


def side_by_side(setup: PipelineSetup, repeats: int = 10, profile_repeats: int = 10,
                 calibration: str | Path | None = None, cores: float | None = None,
                 builtin: bool = True, layer_profile: list[LayerProfile] | None = None,
                 stage_times: list[LayerProfile] | None = None) -> dict[str, Any]:
    """Profile, predict and measure one setup; the record the benchmark and notebooks use.
    ``stage_times``: per-stage times for the prediction (see :func:`predict`)."""
    layer_profile = layer_profile or profile(setup, profile_repeats)
    setup = setup.with_balance(layer_profile)
    predicted = predict(setup, layer_profile, calibration, cores, stage_times=stage_times)
    measured = measure(setup, repeats, builtin)
    return {"record": record(setup, predicted, measured), "predicted": predicted,
            "measured": measured, "profile": layer_profile, "setup": setup}


def record(setup: PipelineSetup, predicted: PipelineResult,
           measured: dict[str, Any]) -> dict[str, Any]:
    """One point: prediction, measurement, relative errors (time and memory per stage)."""
    median = measured["timing"]["median_s"]
    mem_pred = predicted.peak_activation_bytes
    mem_meas = measured["peak_activation_bytes"]
    return {
        "stages": setup.stages, "microbatches": setup.microbatches,
        "schedule": setup.schedule, "checkpoint": setup.checkpoint, "chunks": setup.chunks,
        "balance": list(setup.balance or ()), "batch": setup.batch,
        "predicted_s": predicted.step_time_s, "measured_median_s": median,
        "measured_p10_s": measured["timing"]["p10_s"],
        "measured_p90_s": measured["timing"]["p90_s"],
        "rel_error": (predicted.step_time_s - median) / median,
        "predicted_bubble": predicted.bubble_fraction,
        "predicted_peak_activation_bytes": mem_pred,
        "measured_peak_activation_bytes": mem_meas,
        "memory_rel_error": [(p - m) / m if m else 0.0 for p, m in
                             zip(mem_pred, mem_meas, strict=False)],
        "builtin_median_s": (measured["builtin"] or {}).get("median_s"),
        "foreign_cpu_s": measured["foreign_cpu_s"],
        "foreign_cpu_share": (measured["foreign_cpu_s"] or 0.0)
        / (measured["window_s"] * host_cores()),
    }
