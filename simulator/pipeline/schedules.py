"""Pipeline schedules as pure functions: which rank runs which micro-batch, in what order.

A pipeline splits a model into ``stages`` consecutive pieces, one per rank, and a mini-batch
into ``microbatches`` micro-batches. A *schedule* is, for each rank, the ordered list of the
:class:`Action` s it runs: ``F`` (forward) or ``B`` (backward) of one micro-batch on one model
chunk. Both twins use these lists — the simulator times them on a cluster model, the real
runtime (:mod:`backends.pipeline`) executes them — so a schedule is written once, here, with no
torch and no time in it.

Dependencies every schedule must honour (stage = virtual stage ``chunk · stages + rank``):

* ``F(i)`` on stage s after ``F(i)`` on stage s−1 (its input is that stage's output);
* ``B(i)`` on stage s after ``B(i)`` on stage s+1 (its output gradient) and after ``F(i)`` on s.

:func:`timeline` places a schedule in time under exactly these rules (zero communication cost)
and :func:`draw` prints it as a table, one row per rank, one column per time unit. The tables in
the docstrings below are that output, and the tests check them literally.

Sources: GPipe (Huang et al., NeurIPS 2019), torchgpipe (Kim et al. 2020, §3.2 ``clock_cycles``),
PipeDream (Narayanan et al., SOSP 2019: 1F1B, weight stashing, vertical sync), PipeDream-2BW and
PipeDream-Flush (Narayanan et al., ICML 2021), Megatron-LM interleaved 1F1B (Narayanan et al.,
SC 2021, §2.2). Bubble formulas: ``../shared/REFERENCES.md`` "Pipeline parallel".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

Schedule = list[list["Action"]]
"""Per rank, its actions in execution order."""


@dataclass(frozen=True)
class Action:
    """One step of a rank's schedule.

    Attributes:
        kind: ``"F"`` (forward) or ``"B"`` (backward).
        microbatch: the micro-batch index, 0-based.
        chunk: the model chunk (virtual stage) on this rank, 0 unless interleaved.
    """

    kind: str
    microbatch: int
    chunk: int = 0

    def __str__(self) -> str:
        return f"{self.kind}{self.microbatch}" + (f".{self.chunk}" if self.chunk else "")


def _check(stages: int, microbatches: int) -> None:
    if stages < 1:
        raise ValueError(f"a pipeline needs at least 1 stage, got {stages}")
    if microbatches < 1:
        raise ValueError(f"a pipeline needs at least 1 micro-batch, got {microbatches}")


def gpipe(stages: int, microbatches: int) -> Schedule:
    """GPipe (Huang et al. 2019) / torchgpipe: all forwards, then all backwards.

    Every rank runs ``F0 … F(m−1)`` then ``B(m−1) … B0`` (autograd unwinds the micro-batches
    in reverse order, as in torchgpipe). Every rank holds the activations of all ``m``
    micro-batches at the end of the forward phase. ``draw(gpipe(3, 4))``::

        rank 0: F0 F1 F2 F3 .  .  .  .  B3 B2 B1 B0
        rank 1: .  F0 F1 F2 F3 .  .  B3 B2 B1 B0 .
        rank 2: .  .  F0 F1 F2 F3 B3 B2 B1 B0 .  .
    """
    _check(stages, microbatches)
    forwards = [Action("F", i) for i in range(microbatches)]
    backwards = [Action("B", i) for i in reversed(range(microbatches))]
    return [forwards + backwards for _ in range(stages)]


def one_f_one_b(stages: int, microbatches: int) -> Schedule:
    """1F1B, PipeDream-Flush (Narayanan et al. 2021; PipeDream's schedule with a flush).

    Rank ``r`` runs a warm-up of ``min(p − r − 1, m)`` forwards, then alternates one forward
    and one backward (steady state), then drains the remaining backwards (cool-down). At most
    ``p − r`` micro-batches are in flight on rank ``r`` (GPipe: ``m``), with the same bubble as
    GPipe. ``draw(one_f_one_b(3, 4))``::

        rank 0: F0 F1 F2 .  .  B0 F3 B1 .  B2 .  B3
        rank 1: .  F0 F1 .  B0 F2 B1 F3 B2 .  B3 .
        rank 2: .  .  F0 B0 F1 B1 F2 B2 F3 B3 .  .
    """
    _check(stages, microbatches)
    schedule = []
    for rank in range(stages):
        warmup = min(stages - rank - 1, microbatches)
        actions = [Action("F", i) for i in range(warmup)]
        for i in range(microbatches - warmup):
            actions += [Action("F", warmup + i), Action("B", i)]
        actions += [Action("B", i) for i in range(microbatches - warmup, microbatches)]
        schedule.append(actions)
    return schedule


def interleaved_1f1b(stages: int, microbatches: int, chunks: int) -> Schedule:
    """Interleaved 1F1B (Megatron-LM, Narayanan et al. SC 2021, §2.2.2).

    Each rank holds ``v = chunks`` model chunks: chunk ``c`` of rank ``r`` is virtual stage
    ``c·p + r``, so a micro-batch visits every rank ``v`` times. Micro-batches go through in
    groups of ``p``: a rank runs chunk 0 for ``p`` micro-batches, then chunk 1 for the same
    ``p``, …. Rank ``r`` warms up with ``2·(p − r − 1) + (v − 1)·p`` forwards (all of them
    when ``m = p``), then 1F1B, then cool-down. The bubble shrinks ``v``-fold, to
    ``(p − 1)/(v·m)`` of the ideal time, at ``v`` times the point-to-point messages. Needs
    ``m`` a multiple of ``p``; ``chunks = 1`` is :func:`one_f_one_b`.
    ``draw(interleaved_1f1b(2, 4, 2))`` (``F0.1`` = forward of micro-batch 0 on chunk 1)::

        rank 0: F0   F1   F0.1 F1.1 F2   B0.1 F3   B1.1 F2.1 B0   F3.1 B1   .    B2.1 .    B3.1 B2   B3
        rank 1: .    F0   F1   F0.1 B0.1 F1.1 B1.1 F2   B0   F3   B1   F2.1 B2.1 F3.1 B3.1 B2   B3   .
    """  # noqa: E501
    _check(stages, microbatches)
    if chunks < 1:
        raise ValueError(f"interleaved 1F1B needs at least 1 chunk per rank, got {chunks}")
    if chunks == 1:
        return one_f_one_b(stages, microbatches)
    if microbatches % stages:
        raise ValueError(f"interleaved 1F1B runs micro-batches in groups of the {stages} "
                         f"stages: {microbatches} micro-batches is not a multiple of {stages}")
    group, total = stages * chunks, microbatches * chunks

    def action(kind: str, k: int) -> Action:
        chunk = (k % group) // stages
        return Action(kind, (k // group) * stages + k % stages,
                      chunk if kind == "F" else chunks - 1 - chunk)

    schedule = []
    for rank in range(stages):
        if microbatches == stages:
            warmup = total
        else:
            warmup = min(total, 2 * (stages - rank - 1) + (chunks - 1) * stages)
        actions = [action("F", k) for k in range(warmup)]
        for k in range(total - warmup):
            actions += [action("F", warmup + k), action("B", k)]
        actions += [action("B", k) for k in range(total - warmup, total)]
        schedule.append(actions)
    return schedule


SCHEDULES: dict[str, Callable[..., Schedule]] = {
    "gpipe": gpipe,
    "1f1b": one_f_one_b,
    "interleaved": interleaved_1f1b,
}
"""The synchronous schedules by name; ``interleaved`` takes a third argument, ``chunks``."""


def clock_cycles(m: int, n: int) -> list[list[tuple[int, int]]]:
    """torchgpipe's forward clock (Kim et al. 2020, §3.2): what runs at each clock tick.

    At tick ``k`` partition ``j`` runs micro-batch ``i = k − j``: the (micro-batch, partition)
    pairs with ``i + j = k``, ``0 ≤ i < m``, ``0 ≤ j < n``; ``m + n − 1`` ticks in all.
    ``clock_cycles(4, 3)``, one column per tick::

        partition 0: (0,0) (1,0) (2,0) (3,0)
        partition 1:       (0,1) (1,1) (2,1) (3,1)
        partition 2:             (0,2) (1,2) (2,2) (3,2)
    """
    _check(n, m)
    return [[(k - j, j) for j in range(max(0, k - m + 1), min(k, n - 1) + 1)]
            for k in range(m + n - 1)]


# -- placing a schedule in time ----------------------------------------------------------------

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
    spans = timeline(schedule, forward_ticks, backward_ticks)
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


# -- bubble ------------------------------------------------------------------------------------

def bubble_fraction(stages: int, microbatches: int, chunks: int = 1, *,
                    relative_to: str = "total") -> float:
    """The pipeline bubble of GPipe, 1F1B (``chunks = 1``) or interleaved 1F1B, equal stages.

    Two definitions of one quantity — keep them apart (``../shared/REFERENCES.md``):

    * ``relative_to="total"`` — share of the pipeline's time that a rank is idle,
      ``(p − 1) / (v·m + p − 1)`` (GPipe, Huang et al. 2019: ``(K−1)/(M+K−1)``);
    * ``relative_to="ideal"`` — bubble time over the ideal (bubble-free) time,
      ``(p − 1) / (v·m)`` (Megatron, Narayanan et al. 2021: ``(p−1)/m``, ``(1/v)·(p−1)/m``).

    The first is ``b/(1+b)`` of the second. With ``p`` stages, ``m`` micro-batches and ``v``
    chunks per rank.
    """
    _check(stages, microbatches)
    if chunks < 1:
        raise ValueError(f"chunks must be ≥ 1, got {chunks}")
    if relative_to == "total":
        return (stages - 1) / (chunks * microbatches + stages - 1)
    if relative_to == "ideal":
        return (stages - 1) / (chunks * microbatches)
    raise ValueError(f"relative_to must be 'total' or 'ideal', got {relative_to!r}")


def pipeline_time(stages: int, microbatches: int, forward_s: float, backward_s: float,
                  chunks: int = 1) -> float:
    """Closed-form step time with equal stages and free communication, s.

    ``(m + (p − 1)/v) · (t_f + t_b)``: ``m + p − 1`` clock ticks of ``t_f + t_b`` for GPipe and
    1F1B (torchgpipe's ``m + n − 1`` ticks, each forward and backward), with ``t_f``/``t_b``
    the forward/backward time of one whole stage (all its chunks) per micro-batch.
    """
    _check(stages, microbatches)
    return (microbatches + (stages - 1) / chunks) * (forward_s + backward_s)


# -- asynchronous PipeDream: weight versions ------------------------------------------------------

@dataclass(frozen=True)
class WeightVersions:
    """An asynchronous schedule and the weights each step uses.

    Attributes:
        schedule: per rank, its actions (1F1B without a flush).
        version: per rank, micro-batch → the weight version its forward used (and, with
            weight stashing, its backward uses too). Version ``k`` = after ``k`` updates.
        stashed: per rank, the most weight versions it holds at once (the current one plus
            those still needed by in-flight or later micro-batches).
    """

    schedule: Schedule
    version: list[dict[int, int]]
    stashed: list[int]


def _stash_counts(schedule: Schedule, version: list[dict[int, int]],
                  updates_after: Callable[[int, Action], bool]) -> list[int]:
    counts = []
    for rank, actions in enumerate(schedule):
        current, most = 0, 1
        for t, a in enumerate(actions):
            if a.kind == "B" and updates_after(rank, a):
                current += 1
            later = {version[rank][b.microbatch] for b in actions[t + 1:]}
            needed = {k for k in later if k <= current} | {current}
            most = max(most, len(needed))
        counts.append(most)
    return counts


def pipedream_async(stages: int, microbatches: int, *,
                    vertical_sync: bool = False) -> WeightVersions:
    """PipeDream's asynchronous 1F1B with weight stashing (Narayanan et al., SOSP 2019, §3.3).

    Each micro-batch (a mini-batch in the paper) is followed by a weight update on every stage
    — no flush, no bubble in steady state. *Weight stashing*: a micro-batch's backward uses the
    weights its forward used, so once the pipeline is full (``m ≥ 2p − 1``) stage ``r`` keeps
    ``p − r`` versions, one per micro-batch in flight. *Vertical sync* (optional): every stage
    uses the version stage 0 used for that micro-batch, so all stages see one consistent
    model; then every stage keeps ``p`` versions. The order of actions is
    :func:`one_f_one_b` without a flush. ``draw_versions(pipedream_async(3, 6))`` — the version
    each micro-batch's forward uses (columns), per rank, and the most versions held::

        rank 0: 0 0 0 1 2 3   holds 3
        rank 1: 0 0 1 2 3 4   holds 2
        rank 2: 0 1 2 3 4 5   holds 1

    Rank 0 runs micro-batch 3 on version 1 (after B0), rank 2 on version 3: without vertical
    sync a micro-batch meets weights of different ages on different stages.
    """
    schedule = one_f_one_b(stages, microbatches)
    version: list[dict[int, int]] = []
    for actions in schedule:
        current, used = 0, {}
        for a in actions:
            if a.kind == "F":
                used[a.microbatch] = current
            else:
                current += 1
        version.append(used)
    if vertical_sync:
        version = [dict(version[0]) for _ in range(stages)]
    return WeightVersions(schedule, version, _stash_counts(schedule, version,
                                                           lambda rank, a: True))


def pipedream_2bw(stages: int, microbatches: int, batch: int) -> WeightVersions:
    """PipeDream-2BW, double-buffered weights (Narayanan et al., ICML 2021, §3.1).

    Gradients are accumulated over ``batch`` micro-batches; a stage makes a new weight version
    when it has run the backward of a whole batch, and micro-batches already in flight finish
    on the version they started with. With ``batch ≥ p`` at most two versions ever coexist —
    the *double buffer* — and the update has a delay of one: W(t+1) = W(t) − ν·∇f(W(t−1)).
    ``microbatches`` counts all micro-batches streamed (several batches).
    ``draw_versions(pipedream_2bw(3, 9, 3))``::

        rank 0: 0 0 0 0 0 1 1 1 2   holds 2
        rank 1: 0 0 0 0 1 1 1 2 2   holds 2
        rank 2: 0 0 0 1 1 1 2 2 2   holds 1
    """
    _check(stages, microbatches)
    if batch < stages:
        raise ValueError(f"PipeDream-2BW needs batches of at least the {stages} stages in "
                         f"micro-batches, got {batch}")
    schedule = one_f_one_b(stages, microbatches)

    def ends_batch(rank: int, a: Action) -> bool:
        return (a.microbatch + 1) % batch == 0

    version: list[dict[int, int]] = []
    for rank, actions in enumerate(schedule):
        current, used = 0, {}
        for a in actions:
            if a.kind == "F":
                used[a.microbatch] = current
            elif ends_batch(rank, a):
                current += 1
        version.append(used)
    return WeightVersions(schedule, version, _stash_counts(schedule, version, ends_batch))


def draw_versions(plan: WeightVersions) -> str:
    """The weight version each micro-batch's forward uses, one row per rank, one column per
    micro-batch, and the most versions the rank holds."""
    n = max(len(used) for used in plan.version)
    width = len(str(max(max(used.values()) for used in plan.version)))
    return "\n".join(f"rank {r}: " + " ".join(str(used[i]).rjust(width) for i in range(n))
                     + f"   holds {plan.stashed[r]}" for r, used in enumerate(plan.version))
