"""Placing a schedule in time: its critical path, its idle share, and a drawing of it.

:func:`timeline` runs a schedule as early as its dependencies allow (zero communication cost
unless ``p2p_s`` says otherwise) and :func:`draw` prints it as a table, one row per rank, one
column per time unit. The dependencies it honours are those of every schedule
(:mod:`simulator.pipeline.schedules`): a forward after the previous stage's forward, a
backward after the next stage's backward and its own forward.

Units: seconds (or clock ticks for :func:`draw`).
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.pipeline.schedules.action import Action, Schedule

Span = tuple[float, float, Action]
"""``(start_s, end_s, action)``."""


def _chunks(schedule: Schedule) -> int:
    return 1 + max((a.chunk for actions in schedule for a in actions), default=0)


def timeline(schedule: Schedule, forward_s: float | Sequence[float] = 1.0,
             backward_s: float | Sequence[float] = 1.0,
             p2p_s: float | Sequence[float] = 0.0) -> list[list[Span]]:
    """Run a schedule as early as its dependencies allow: its critical path, exactly.

    Each rank executes its actions in order; an action starts when the rank is free and its
    inputs exist (see the module docstring). ``forward_s``/``backward_s`` are one number for
    every stage or one per virtual stage (``chunk·p + rank``), s. ``p2p_s`` is the delay of
    an activation (forward) or gradient (backward) between virtual stages ``j`` and ``j + 1``
    when they sit on different ranks, one number or one per boundary, s — links that never
    queue (α-β with no contention). Returns each rank's spans; raises ``ValueError`` if the
    schedule deadlocks or misses/duplicates an action.
    """
    p, v = len(schedule), _chunks(schedule)
    stages = p * v

    def cost(t: float | Sequence[float], stage: int) -> float:
        return float(t) if isinstance(t, int | float) else float(t[stage])

    for name, t, n in (("forward_s", forward_s, stages), ("backward_s", backward_s, stages),
                       ("p2p_s", p2p_s, stages - 1)):
        if not isinstance(t, int | float) and len(t) != n:
            raise ValueError(f"{name} has {len(t)} entries for {n} "
                             f"{'boundaries' if name == 'p2p_s' else 'stages'}")

    def delay(boundary: int) -> float:
        return cost(p2p_s, boundary) if p > 1 else 0.0
    microbatches = {a.microbatch for actions in schedule for a in actions}
    for rank, actions in enumerate(schedule):
        for c in range(v):
            for kind in "FB":
                got = sorted(a.microbatch for a in actions if a.kind == kind and a.chunk == c)
                if got != sorted(microbatches):
                    raise ValueError(f"rank {rank} chunk {c} must run {kind} of every "
                                     f"micro-batch exactly once; it runs {got}")
    done: dict[tuple[str, int, int], float] = {}
    spans: list[list[Span]] = [[] for _ in range(p)]
    free = [0.0] * p
    nxt = [0] * p
    remaining = sum(len(a) for a in schedule)
    while remaining:
        progressed = False
        for rank in range(p):
            while nxt[rank] < len(schedule[rank]):
                a = schedule[rank][nxt[rank]]
                stage = a.chunk * p + rank
                # (dependency, delay after it): the input from the neighbouring stage
                if a.kind == "F":
                    deps = [(("F", a.microbatch, stage - 1), delay(stage - 1))] if stage else []
                    duration = cost(forward_s, stage)
                elif a.kind == "B":
                    deps = [(("F", a.microbatch, stage), 0.0)]
                    if stage < stages - 1:
                        deps.append((("B", a.microbatch, stage + 1), delay(stage)))
                    duration = cost(backward_s, stage)
                else:
                    raise ValueError(f"rank {rank}: unknown action kind {a.kind!r}")
                if any(d not in done for d, _ in deps):
                    break
                start = max([free[rank], *(done[d] + lag for d, lag in deps)])
                free[rank] = done[(a.kind, a.microbatch, stage)] = start + duration
                spans[rank].append((start, start + duration, a))
                nxt[rank] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {r: str(schedule[r][nxt[r]]) for r in range(p) if nxt[r] < len(schedule[r])}
            raise ValueError(f"schedule deadlocks: ranks wait forever at {stuck}")
    return spans


def makespan(spans: list[list[Span]]) -> float:
    """The time the last action ends, s."""
    return max((s[-1][1] for s in spans if s), default=0.0)


def idle_fraction(spans: list[list[Span]]) -> float:
    """Idle share of the ranks' total time, ``Σ idle / (p · makespan)`` — GPipe's bubble."""
    total = makespan(spans) * len(spans)
    busy = sum(end - start for rank in spans for start, end, _ in rank)
    return (total - busy) / total if total else 0.0


def in_flight(actions: Sequence[Action]) -> int:
    """The most micro-batches (per chunk) whose forward ran but backward has not, on one rank:
    how many micro-batches' activations the rank stashes at once."""
    live: set[tuple[int, int]] = set()
    most = 0
    for a in actions:
        if a.kind == "F":
            live.add((a.microbatch, a.chunk))
            most = max(most, len(live))
        else:
            live.discard((a.microbatch, a.chunk))
    return most


def draw(schedule: Schedule, forward_ticks: int = 1, backward_ticks: int = 1) -> str:
    """The schedule as a text table: one row per rank, one column per time unit, ``.`` idle."""
    return spans_table(schedule, timeline(schedule, forward_ticks, backward_ticks))


def spans_table(schedule: Schedule, spans: list[list[Span]]) -> str:
    """Timed spans (whole ticks) as the text table of :func:`draw`: one row per rank, one
    column per tick, each action's name across its ticks, ``.`` idle."""
    ticks = round(makespan(spans))
    width = max(len(str(a)) for actions in schedule for a in actions)
    rows = []
    for rank, row in enumerate(spans):
        cells = ["."] * ticks
        for start, end, a in row:
            for t in range(round(start), round(end)):
                cells[t] = str(a)
        rows.append(f"rank {rank}: " + " ".join(c.ljust(width) for c in cells).rstrip())
    return "\n".join(rows)
