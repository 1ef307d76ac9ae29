"""Schedules whose backward is split in two, placed in time: the zero-bubble critical path.

A layer's backward computes two things that need not happen together (Qi et al. 2024, "Zero
Bubble Pipeline Parallelism", §2): the gradient of its *input*, which the previous stage is
waiting for, and the gradient of its *weights*, which nobody waits for until the optimizer
step. Zero-bubble schedules run them as two actions — ``I`` (input gradient, on the critical
path) and ``W`` (weight gradient, free to move into a bubble) — beside ``F`` and the fused
``B = I + W`` that DualPipe-V still uses part of the time. The kinds are plain
:class:`~simulator.pipeline.schedules.action.Action` kinds.

Where a rank's chunks sit (a *placement*, by name):

* ``"loop"`` — chunk ``c`` of rank ``r`` is stage ``c·p + r`` (Megatron's interleaving);
* ``"v"`` — chunk 0 of rank ``r`` is stage ``r`` and chunk 1 is stage ``2p − 1 − r``: a
  micro-batch goes down the ranks and back up, so rank 0 holds the first and the last stage
  (ZB-V, Qi et al. 2024 §6; DualPipe-V).

Dependencies (stage ``s`` of ``S``): ``F(i)`` on ``s`` after ``F(i)`` on ``s − 1``;
``I(i)``/``B(i)`` on ``s`` after ``F(i)`` on ``s`` and after ``I(i)``/``B(i)`` on ``s + 1``
(the gradient of its output); ``W(i)`` on ``s`` after ``I(i)`` on ``s``.

Activation memory: a micro-batch's activations on a stage live from its ``F`` until its
``W`` (or ``B``) — the weight gradient still needs the saved layer inputs, so deferring ``W``
defers the free (Qi et al. 2024 §3.1). :func:`in_flight_split` counts them.

Units: seconds (ticks for :func:`draw_split`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simulator.pipeline.schedules.action import Action, Schedule
from simulator.pipeline.schedules.critical_path import Span, idle_fraction, spans_table

KINDS = ("F", "I", "W", "B")
"""Action kinds of a split-backward schedule."""

PLACEMENTS = ("loop", "v")


def stage_of(rank: int, chunk: int, ranks: int, placement: str = "loop") -> int:
    """The (global) stage that chunk ``chunk`` of rank ``rank`` of ``ranks`` runs."""
    if placement == "loop":
        return chunk * ranks + rank
    if placement == "v":
        if chunk not in (0, 1):
            raise ValueError(f"the V placement has 2 chunks per rank, got chunk {chunk}")
        return rank if chunk == 0 else 2 * ranks - 1 - rank
    raise ValueError(f"unknown placement {placement!r}; choose one of {', '.join(PLACEMENTS)}")


def _chunks(schedule: Schedule) -> int:
    return 1 + max((a.chunk for actions in schedule for a in actions), default=0)


def check_split(schedule: Schedule) -> None:
    """Raise ``ValueError`` unless every (rank, chunk, micro-batch) runs ``F`` once and its
    backward once — one ``B``, or one ``I`` and one ``W`` — with ``I`` before ``W``."""
    v = _chunks(schedule)
    batches = {a.microbatch for actions in schedule for a in actions}
    for rank, actions in enumerate(schedule):
        for a in actions:
            if a.kind not in KINDS:
                raise ValueError(f"rank {rank}: unknown action kind {a.kind!r}")
        for c in range(v):
            for i in batches:
                kinds = [a.kind for a in actions if a.chunk == c and a.microbatch == i]
                if kinds.count("F") != 1 or sorted(kinds) not in (["B", "F"], ["F", "I", "W"]):
                    raise ValueError(f"rank {rank} chunk {c} micro-batch {i} runs {kinds}; "
                                     "it must run F once and B once, or I then W once")
                if "W" in kinds and kinds.index("W") < kinds.index("I"):
                    raise ValueError(f"rank {rank} chunk {c} micro-batch {i}: W before I")


Costs = float | Sequence[float]
"""One time for every stage, or one per stage, s."""


def timeline_split(schedule: Schedule, placement: str = "loop", forward_s: Costs = 1.0,
                   input_s: Costs = 1.0, weight_s: Costs = 1.0, p2p_s: float = 0.0
                   ) -> list[list[Span]]:
    """Run a split-backward schedule as early as its dependencies allow (module docstring).

    ``forward_s``, ``input_s`` (``I``) and ``weight_s`` (``W``) are one number or one per
    stage, s; a fused ``B`` takes ``input_s + weight_s``. ``p2p_s`` delays every activation
    or gradient that crosses to another rank, s. Returns each rank's spans; raises
    ``ValueError`` on a malformed schedule or a deadlock.
    """
    check_split(schedule)
    p, v = len(schedule), _chunks(schedule)
    stages = p * v
    where = {stage_of(r, c, p, placement): r for r in range(p) for c in range(v)}

    def cost(t: Costs, stage: int) -> float:
        return float(t) if isinstance(t, int | float) else float(t[stage])

    def lag(a: int, b: int) -> float:
        return p2p_s if where[a] != where[b] else 0.0

    done: dict[tuple[str, int, int], float] = {}
    spans: list[list[Span]] = [[] for _ in range(p)]
    free, nxt = [0.0] * p, [0] * p
    remaining = sum(len(a) for a in schedule)
    while remaining:
        progressed = False
        for rank in range(p):
            while nxt[rank] < len(schedule[rank]):
                a = schedule[rank][nxt[rank]]
                s, i = stage_of(rank, a.chunk, p, placement), a.microbatch
                deps: list[tuple[tuple[str, int, int], float]] = []
                if a.kind == "F":
                    deps = [(("F", i, s - 1), lag(s - 1, s))] if s else []
                    duration = cost(forward_s, s)
                elif a.kind == "W":
                    deps = [(("I", i, s), 0.0)]
                    duration = cost(weight_s, s)
                else:
                    deps = [(("F", i, s), 0.0)]
                    if s < stages - 1:
                        deps.append((("I", i, s + 1), lag(s + 1, s)))
                    duration = cost(input_s, s) + (cost(weight_s, s) if a.kind == "B" else 0)
                if any(d not in done for d, _ in deps):
                    break
                start = max([free[rank], *(done[d] + delay for d, delay in deps)])
                free[rank] = start + duration
                done[("F" if a.kind == "F" else "W" if a.kind == "W" else "I", i, s)] = \
                    free[rank]
                if a.kind == "B":  # a fused backward makes the input gradient, too
                    done[("W", i, s)] = free[rank]
                spans[rank].append((start, free[rank], a))
                nxt[rank] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {r: str(schedule[r][nxt[r]]) for r in range(p) if nxt[r] < len(schedule[r])}
            raise ValueError(f"schedule deadlocks: ranks wait forever at {stuck}")
    return spans


def in_flight_split(actions: Sequence[Action]) -> int:
    """The most (micro-batch, chunk) pairs on one rank whose ``F`` ran but whose ``W`` (or
    ``B``) has not: how many micro-batches' activations the rank holds at once, in units of one
    chunk's activations of one micro-batch."""
    live: set[tuple[int, int]] = set()
    most = 0
    for a in actions:
        if a.kind == "F":
            live.add((a.microbatch, a.chunk))
            most = max(most, len(live))
        elif a.kind in ("W", "B"):
            live.discard((a.microbatch, a.chunk))
    return most


def peak_activation_bytes(actions: Sequence[Action], rank: int, ranks: int,
                          activation_bytes: Mapping[int, int] | Sequence[int],
                          placement: str = "loop") -> int:
    """Peak activation bytes on ``rank``: the live sum over its in-flight (micro-batch, chunk)
    pairs of their stage's ``activation_bytes`` (bytes one micro-batch keeps, per stage)."""
    live, peak = 0, 0
    for a in actions:
        nbytes = activation_bytes[stage_of(rank, a.chunk, ranks, placement)]
        if a.kind == "F":
            live += nbytes
            peak = max(peak, live)
        elif a.kind in ("W", "B"):
            live -= nbytes
    return peak


def idle_share(spans: list[list[Span]]) -> float:
    """The bubble: idle share of the ranks' total time, ``Σ idle / (p · makespan)``
    (:func:`~simulator.pipeline.schedules.critical_path.idle_fraction`, which it is)."""
    return idle_fraction(spans)


def draw_split(schedule: Schedule, placement: str = "loop") -> str:
    """The schedule as a table, one row per rank, one column per tick (``F``, ``I`` and ``W``
    one tick each, a fused ``B`` two), ``.`` idle; chunk 1's actions carry ``.1``."""
    return spans_table(schedule, timeline_split(schedule, placement))
