"""The simulated zero-bubble pipeline: ZB-H1, ZB-V, DualPipe-V on a cluster model (ch. 23).

Twin of :mod:`backends.pipeline.zero_bubble`. Like :func:`~simulator.pipeline.simulate.
pipeline_stage` (chapters 8–9), each rank runs its actions from
:mod:`~simulator.pipeline.schedules.zero_bubble` in order, on a cluster model, but with the
backward split (Qi et al. 2024, §2):

* ``F`` of micro-batch ``i`` on stage ``s``: receive the activation from stage ``s − 1``
  (unless it lives on this rank — the V placement keeps stages ``p − 1`` and ``p`` together),
  compute, keep the stage's activations, send the output on (``isend``: it overlaps what
  follows);
* ``I``: receive the output's gradient from ``s + 1``, compute the input gradient, send it
  to ``s − 1``; the activations stay, since ``W`` needs them;
* ``W``: compute the weight gradient, free the activations;
* ``B`` (DualPipe-V's fused backward): ``I`` and ``W`` back to back, one compute span.

Compute time comes from per-stage costs (:class:`SplitStageCost`, measured on one process)
spent on the host's shared cores (:class:`~simulator.core.cores.CorePool`); the optimizer step
after the flush costs ``update_s`` on each rank. With free links and a core per rank the step
equals :func:`~simulator.pipeline.schedules.split_backward.timeline_split` — the critical
path — exactly (tests check it).

Units: seconds, bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulator.core.comm import SimComm, SimGen, SimWork, run_spmd
from simulator.core.cores import CorePool
from simulator.core.cores import spend as spend_on_cores
from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.pipeline.schedules.action import Schedule
from simulator.pipeline.schedules.split_backward import stage_of
from simulator.pipeline.schedules.zero_bubble import ZERO_BUBBLE


@dataclass(frozen=True)
class SplitStageCost:
    """One stage, for one micro-batch.

    Attributes:
        forward_s / input_s / weight_s: times of ``F``, ``I`` (input gradient) and ``W``
            (weight gradient) on one core, s.
        activation_bytes: bytes kept from ``F`` to ``W``.
        output_bytes: bytes of the stage's output (the activation sent on; its gradient
            comes back the same size).
    """

    forward_s: float
    input_s: float
    weight_s: float
    activation_bytes: int
    output_bytes: int


@dataclass(frozen=True)
class ZeroBubbleResult:
    """One simulated step.

    Attributes:
        step_time_s: every micro-batch's F, I and W on every stage, then the update, s.
        bubble_fraction: idle share of the ranks' time, ``1 − busy/(p · step)``.
        peak_activation_bytes: per rank.
        schedule: per rank, the actions run.
        trace: every compute, send and receive span.
    """

    step_time_s: float
    bubble_fraction: float
    peak_activation_bytes: list[int]
    schedule: Schedule
    trace: Trace


def _tag(stage: int, microbatch: int, stages: int, backward: bool) -> int:
    return 2 * (microbatch * stages + stage) + backward


def zero_bubble_stage(comm: SimComm, schedule: Schedule, placement: str,
                      costs: Sequence[SplitStageCost], update_s: float,
                      shared: dict[str, Any]) -> SimGen:
    """Rank program: run this rank's actions (module docstring); returns its busy seconds."""
    pool: CorePool | None = None
    if not math.isinf(shared["cores"]):
        pool = shared.setdefault("pool", CorePool(comm.env, shared["cores"]))
    p, rank, last = len(schedule), comm.rank, len(costs) - 1
    where = {stage_of(r, c, p, placement): r
             for r in range(p) for c in range(len(costs) // p)}
    sends: list[SimWork] = []
    busy = 0.0

    def remote(stage: int) -> bool:
        return where[stage] != rank

    for a in schedule[rank]:
        s, i = stage_of(rank, a.chunk, p, placement), a.microbatch
        c = costs[s]
        if a.kind == "F":
            if s > 0 and remote(s - 1):
                yield from comm.recv(where[s - 1], costs[s - 1].output_bytes,
                                     _tag(s, i, len(costs), False))
            busy += yield from spend_on_cores(comm, c.forward_s, f"F{i}", pool)
            comm.alloc(c.activation_bytes)
            if s < last and remote(s + 1):
                sends.append(comm.isend(where[s + 1], c.output_bytes,
                                        _tag(s + 1, i, len(costs), False)))
        elif a.kind in ("I", "B"):
            if s < last and remote(s + 1):
                yield from comm.recv(where[s + 1], c.output_bytes, _tag(s, i, len(costs), True))
            seconds = c.input_s + (c.weight_s if a.kind == "B" else 0.0)
            busy += yield from spend_on_cores(comm, seconds, f"{a.kind}{i}", pool)
            if a.kind == "B":
                comm.free(c.activation_bytes)
            if s > 0 and remote(s - 1):
                sends.append(comm.isend(where[s - 1], costs[s - 1].output_bytes,
                                        _tag(s - 1, i, len(costs), True)))
        else:
            busy += yield from spend_on_cores(comm, c.weight_s, f"W{i}", pool)
            comm.free(c.activation_bytes)
    for work in sends:
        yield work.wait()
    if update_s:
        busy += yield from spend_on_cores(comm, update_s, "update", pool)
    return busy


def simulate_zero_bubble(cluster: Cluster, costs: Sequence[SplitStageCost], microbatches: int,
                         schedule: str = "zb_h1", *, update_s: float = 0.0,
                         cores: float = math.inf, trace: bool = True) -> ZeroBubbleResult:
    """Simulate one step of ``schedule`` (``zb_h1``, ``zbv``, ``dualpipev``) on ``cluster``.

    ``costs``: one per stage — ``p`` for ZB-H1, ``2p`` for the V schedules, stage order.
    ``cores``: CPU cores the ranks share (``math.inf``: one each).
    """
    if schedule not in ZERO_BUBBLE:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of "
                         f"{', '.join(ZERO_BUBBLE)}")
    make, placement = ZERO_BUBBLE[schedule]
    p = cluster.world_size
    chunks = 2 if placement == "v" else 1
    if len(costs) != p * chunks:
        raise ValueError(f"{schedule} on {p} ranks has {p * chunks} stages; got "
                         f"{len(costs)} stage costs")
    actions = make(p, microbatches)
    sim = run_spmd(cluster, zero_bubble_stage, actions, placement, costs, update_s,
                   {"cores": cores}, trace=trace)
    step = sim.makespan_s
    busy = sum(sim.returns)
    return ZeroBubbleResult(step, 1 - busy / (p * step) if step else 0.0,
                            list(sim.peak_memory_bytes), actions, sim.trace)
