"""The simulated pipeline: stages on ranks, micro-batches through a schedule, on a cluster model.

Twin of :mod:`backends.pipeline` (book chapters 8–11). A model given by its per-layer
:class:`~simulator.pipeline.profile.LayerProfile` is cut into contiguous *stages* by a
``balance`` (layers per stage, torchgpipe's word). Rank ``r`` owns stage ``r`` — or, with
interleaved 1F1B, the virtual stages ``c·p + r`` of its ``v`` chunks. Each rank runs its
actions from :mod:`~simulator.pipeline.schedules` in order, like the real runtime:

* ``F`` of micro-batch ``i`` on stage ``j``: receive the activation from stage ``j − 1``
  (``out_bytes`` of that stage's last layer), compute the forward (the sum of its layers'
  ``forward_s``), keep what the backward needs, send the output to stage ``j + 1``;
* ``B``: receive the output gradient from stage ``j + 1`` (same size as the activation),
  recompute the forward first if the micro-batch was checkpointed, compute the backward,
  free the activations, send the input gradient to stage ``j − 1``.

Sends are non-blocking (``isend``, bytes leave at once), so communication overlaps the next
action. Gradients of all micro-batches accumulate into one buffer per stage (gradient
accumulation); after the flush each stage may spend ``update_s`` on the optimizer step, and,
when stages are replicated over ``replicas`` data-parallel pipelines, first ring-all-reduces
its gradients (:mod:`simulator.collectives`) with its replicas.

**Activation memory** per rank is accounted with ``alloc``/``free`` (torchgpipe's checkpoint
modes, Kim et al. 2020 §3.4): ``never`` keeps every layer's ``activation_bytes`` from ``F`` to
``B``; ``always`` keeps only the stage's input (the checkpoint) and recomputes the forward in
``B`` (time ``+ forward_s``, and the stage's activations alive during that ``B``);
``except_last`` checkpoints every micro-batch but the last (GPipe's backward starts with it,
right after its forward). **Weights**: each rank holds its stages' ``parameter_bytes``; the
asynchronous PipeDream schedules stash weight versions
(:func:`~simulator.pipeline.schedules.pipedream_async`), reported in bytes.

Closed forms beside it: :func:`~simulator.pipeline.schedules.pipeline_time` (``m + p − 1``
ticks, equal stages, free network) and :func:`gpipe_time` (any stages, α-β links); with no
contention the simulation equals :func:`~simulator.pipeline.schedules.timeline` — the
schedule's critical path — exactly (tests check both).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulator.collectives.all_reduce import ring_all_reduce
from simulator.core.comm import SimComm, SimGen, SimResult, SimWork, run_spmd
from simulator.core.cores import CorePool
from simulator.core.cores import spend as spend_on_cores
from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.pipeline.balance import balance_by_time
from simulator.pipeline.profile import LayerProfile, stage_profiles
from simulator.pipeline.schedules import (
    Schedule,
    WeightVersions,
    gpipe,
    interleaved_1f1b,
    one_f_one_b,
    pipedream_2bw,
    pipedream_async,
)

CHECKPOINT_MODES = ("never", "always", "except_last")
SCHEDULE_NAMES = ("gpipe", "1f1b", "interleaved", "pipedream", "pipedream_2bw")


@dataclass(frozen=True)
class StageCost:
    """One (virtual) stage, summed over its layers, for one micro-batch.

    Attributes:
        forward_s / backward_s: compute times, s.
        activation_bytes: bytes kept from ``F`` to ``B`` without checkpointing.
        input_bytes: bytes of the stage's input (what a checkpoint keeps; what arrives).
        output_bytes: bytes of the stage's output (what it sends on).
        parameter_bytes: bytes of its weights.
        forward_together_s / backward_together_s: compute times while other ranks compute
            too (:class:`~simulator.core.cores.CorePool`), s; ``None``: as alone.
    """

    forward_s: float
    backward_s: float
    activation_bytes: int
    input_bytes: int
    output_bytes: int
    parameter_bytes: int
    forward_together_s: float | None = None
    backward_together_s: float | None = None


def _together(values: Sequence[float | None]) -> float | None:
    """The sum of the layers' together times, if every layer has one."""
    return None if any(v is None for v in values) else sum(v or 0.0 for v in values)


def stage_costs(profile: Sequence[LayerProfile], balance: Sequence[int],
                input_bytes: int = 0) -> list[StageCost]:
    """Sum a profile over the stages of ``balance``; ``input_bytes`` is the model's input."""
    costs, before = [], input_bytes
    for layers in stage_profiles(profile, balance):
        out = layers[-1].out_bytes
        costs.append(StageCost(
            sum(x.forward_s for x in layers), sum(x.backward_s for x in layers),
            sum(x.activation_bytes for x in layers), before, out,
            sum(x.parameter_bytes for x in layers),
            _together([x.forward_together_s for x in layers]),
            _together([x.backward_together_s for x in layers])))
        before = out
    return costs


@dataclass(frozen=True)
class PipelineResult:
    """What one simulated pipeline step produced.

    Attributes:
        step_time_s: time of one step (all micro-batches forward and backward, plus the
            flush's all-reduce and update), s.
        throughput: micro-batches per second, ``replicas · m / step_time_s``.
        bubble_fraction: idle share of the ranks' time, ``1 − busy/(ranks · step)`` (GPipe's
            definition; compute counts as busy, waiting and communication do not; a rank
            computing slowly on an oversubscribed core counts as busy).
        peak_activation_bytes: per rank, the peak of activation memory.
        parameter_bytes: per rank, the bytes of the weights it holds (one version).
        weight_versions: per rank, the most weight versions held at once (1 for synchronous
            schedules; weight stashing and 2BW hold more).
        weight_bytes: per rank, ``weight_versions · parameter_bytes``.
        balance: layers per (virtual) stage.
        stages: the per-stage costs used.
        schedule: per rank, the actions run.
        trace: every span (compute ``F3``/``B3``/``R3`` for recompute, sends, receives).
        sim: the raw :class:`~simulator.core.comm.SimResult`.
    """

    step_time_s: float
    throughput: float
    bubble_fraction: float
    peak_activation_bytes: list[int]
    parameter_bytes: list[int]
    weight_versions: list[int]
    weight_bytes: list[int]
    balance: list[int]
    stages: list[StageCost]
    schedule: Schedule
    trace: Trace
    sim: SimResult


def _checkpointed(mode: str, microbatch: int, microbatches: int) -> bool:
    return mode == "always" or (mode == "except_last" and microbatch < microbatches - 1)


def _tag(stage: int, microbatch: int, stages: int, backward: bool) -> int:
    """A message tag naming (micro-batch, receiving stage, direction): never mismatched."""
    return 2 * (microbatch * stages + stage) + backward


def pipeline_stage(comm: SimComm, schedule: Schedule, costs: Sequence[StageCost],
                   microbatches: int, checkpoint: str, pipelines: int,
                   update_s: float, update_each_backward: bool,
                   shared: dict[str, Any]) -> SimGen:
    """Rank program: run this rank's actions; then all-reduce and update at the flush.

    Returns the seconds this rank spent computing (forward, recompute, backward, update).
    Global rank ``d·p + r`` is stage rank ``r`` of data-parallel pipeline ``d``. All ranks'
    ``shared["cores"]`` CPU cores form one :class:`~simulator.core.cores.CorePool`
    (``math.inf``: a core per rank, no pool).
    """
    pool: CorePool | None = None
    if not math.isinf(shared["cores"]) or any(
            c.forward_together_s is not None or c.backward_together_s is not None
            for c in costs):
        pool = shared.setdefault("pool", CorePool(comm.env, shared["cores"]))

    def spend(seconds: float, name: str, together_s: float | None = None) -> SimGen:
        return spend_on_cores(comm, seconds, name, pool, together_s)

    p = len(schedule)
    pipe = comm.new_group([comm.rank // p * p + s for s in range(p)])
    replicas = comm.new_group([d * p + comm.rank % p for d in range(pipelines)])
    assert pipe is not None and replicas is not None
    rank, last = pipe.rank, len(costs) - 1
    kept: dict[tuple[int, int], int] = {}
    sends: list[SimWork] = []
    busy = 0.0
    for a in schedule[rank]:
        j = a.chunk * p + rank
        c, i = costs[j], a.microbatch
        ckpt = _checkpointed(checkpoint, i, microbatches)
        if a.kind == "F":
            if j > 0 and p > 1:
                yield from pipe.recv((j - 1) % p, c.input_bytes, _tag(j, i, len(costs), False))
            busy += yield from spend(c.forward_s, f"F{i}", c.forward_together_s)
            kept[(i, a.chunk)] = c.input_bytes if ckpt else c.activation_bytes
            pipe.alloc(kept[(i, a.chunk)])
            if j < last and p > 1:
                sends.append(pipe.isend((j + 1) % p, c.output_bytes,
                                        _tag(j + 1, i, len(costs), False)))
        else:
            if j < last and p > 1:
                yield from pipe.recv((j + 1) % p, c.output_bytes, _tag(j, i, len(costs), True))
            if ckpt:  # re-materialise the stage's activations from the checkpoint
                pipe.alloc(c.activation_bytes)
                busy += yield from spend(c.forward_s, f"R{i}", c.forward_together_s)
            busy += yield from spend(c.backward_s, f"B{i}", c.backward_together_s)
            pipe.free(kept.pop((i, a.chunk)) + (c.activation_bytes if ckpt else 0))
            if j > 0 and p > 1:
                sends.append(pipe.isend((j - 1) % p, c.input_bytes,
                                        _tag(j - 1, i, len(costs), True)))
            if update_each_backward and update_s:
                busy += yield from spend(update_s, f"U{i}")
    for work in sends:
        yield work.wait()
    if pipelines > 1:
        grads = sum(costs[j].parameter_bytes for j in range(rank, len(costs), p))
        start = comm.now
        yield from ring_all_reduce(replicas, grads)
        comm.span("step", "all-reduce gradients", start, grads)
    if update_s and not update_each_backward:
        busy += yield from spend(update_s, "update")
    return busy


def _schedule(name: str, stages: int, microbatches: int, chunks: int,
              batch: int | None) -> tuple[Schedule, list[int]]:
    """The actions and the weight versions per rank for a schedule name."""
    versions: WeightVersions | None = None
    if name == "gpipe":
        actions = gpipe(stages, microbatches)
    elif name == "1f1b":
        actions = one_f_one_b(stages, microbatches)
    elif name == "interleaved":
        actions = interleaved_1f1b(stages, microbatches, chunks)
    elif name == "pipedream":
        versions = pipedream_async(stages, microbatches)
    elif name == "pipedream_2bw":
        versions = pipedream_2bw(stages, microbatches, batch or stages)
    else:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(SCHEDULE_NAMES)}")
    if versions is not None:
        return versions.schedule, versions.stashed
    return actions, [1] * stages


def simulate_pipeline(cluster: Cluster, profile: Sequence[LayerProfile],
                      balance: Sequence[int] | None, microbatches: int,
                      schedule: str = "gpipe", checkpoint: str = "never", *,
                      chunks: int = 1, input_bytes: int = 0, replicas: int = 1,
                      update_s: float = 0.0, batch: int | None = None,
                      cores: float = math.inf, trace: bool = True) -> PipelineResult:
    """Simulate one pipeline step on ``cluster`` (a step of async PipeDream: ``m`` inputs).

    Args:
        cluster: ``stages · replicas`` ranks; rank ``d·p + r`` is stage ``r`` of pipeline
            ``d``.
        profile: per-layer costs for one micro-batch.
        balance: layers per virtual stage (``p·chunks`` entries); ``None`` balances by time
            (:func:`~simulator.pipeline.balance.balance_by_time`).
        microbatches: ``m``.
        schedule: ``gpipe``, ``1f1b``, ``interleaved`` (with ``chunks``), ``pipedream``
            (asynchronous 1F1B with weight stashing: an update after every backward) or
            ``pipedream_2bw`` (double-buffered weights, an update every ``batch``
            micro-batches; timed like 1F1B, its updates are cheap and off the critical path).
        checkpoint: ``never``, ``always`` or ``except_last``.
        input_bytes: bytes of one micro-batch's model input (stage 0's checkpoint).
        replicas: data-parallel pipelines; each stage all-reduces its gradients at the flush.
        update_s: optimizer time per update on each rank, s.
        batch: micro-batches per weight version for ``pipedream_2bw`` (default: stages).
        cores: CPU cores the ranks share (ranks as processes on one host: while more ranks
            compute than there are cores, each computes at ``cores/computing`` speed;
            :mod:`~simulator.core.cores`). ``math.inf``: a core per rank. A profile
            with ``forward_together_s``/``backward_together_s`` also slows a computation
            while others run (shared cache and memory bandwidth), whatever ``cores``.
        trace: record spans.
    """
    if replicas < 1:
        raise ValueError(f"replicas must be ≥ 1, got {replicas}")
    if cluster.world_size % replicas:
        raise ValueError(f"{cluster.world_size} ranks do not split into {replicas} pipelines")
    if checkpoint not in CHECKPOINT_MODES:
        raise ValueError(f"unknown checkpoint mode {checkpoint!r}; choose one of "
                         f"{', '.join(CHECKPOINT_MODES)}")
    p = cluster.world_size // replicas
    v = chunks if schedule == "interleaved" else 1
    if balance is None:
        if len(profile) < p * v:
            raise ValueError(f"{len(profile)} layers cannot fill {p * v} stages")
        balance = balance_by_time(profile, p * v)
    if len(balance) != p * v:
        raise ValueError(f"balance has {len(balance)} stages but {p} ranks × {v} chunks "
                         f"need {p * v}")
    costs = stage_costs(profile, balance, input_bytes)
    actions, versions = _schedule(schedule, p, microbatches, chunks, batch)
    sim = run_spmd(cluster, pipeline_stage, actions, costs, microbatches, checkpoint,
                   replicas, update_s, schedule == "pipedream", {"cores": cores}, trace=trace)
    busy = sum(sim.returns)
    step = sim.makespan_s
    params = [sum(costs[j].parameter_bytes for j in range(r % p, p * v, p))
              for r in range(cluster.world_size)]
    versions = [versions[r % p] for r in range(cluster.world_size)]
    return PipelineResult(
        step_time_s=step,
        throughput=replicas * microbatches / step if step else float("inf"),
        bubble_fraction=1 - busy / (cluster.world_size * step) if step else 0.0,
        peak_activation_bytes=list(sim.peak_memory_bytes),
        parameter_bytes=params, weight_versions=versions,
        weight_bytes=[n * b for n, b in zip(versions, params, strict=True)],
        balance=list(balance), stages=costs, schedule=actions, trace=sim.trace, sim=sim)


def gpipe_time(costs: Sequence[StageCost], microbatches: int,
               p2p_s: Sequence[float] | float = 0.0) -> float:
    """Closed form of a GPipe step on links that never queue, any stages, no checkpointing, s.

    The forward phase is a flow shop of ``m`` identical jobs over the stages, with a delay
    ``d_j`` between stage ``j`` and ``j + 1``; its last job leaves the last stage at
    ``Σ t_F + Σ d + (m − 1)·max t_F``. The backward phase starts there and flows back the same
    way::

        T = Σ_j (t_F,j + t_B,j) + 2·Σ_j d_j + (m − 1)·(max_j t_F,j + max_j t_B,j)

    With equal stages and no delay: ``(m + p − 1)(t_F + t_B)`` (GPipe; torchgpipe's
    ``m + n − 1`` clock ticks).
    """
    n = len(costs)
    delays = [float(p2p_s)] * (n - 1) if isinstance(p2p_s, int | float) else list(p2p_s)
    fwd = [c.forward_s for c in costs]
    bwd = [c.backward_s for c in costs]
    return (sum(fwd) + sum(bwd) + 2 * sum(delays)
            + (microbatches - 1) * (max(fwd) + max(bwd)))
