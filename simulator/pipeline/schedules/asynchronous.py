"""Asynchronous PipeDream: weight versions, stashing, vertical sync and PipeDream-2BW.

The order of actions is :func:`~simulator.pipeline.schedules.synchronous.one_f_one_b` without a
flush; what these schedules add is which weight version each micro-batch uses and how many
versions a stage must hold at once (:class:`WeightVersions`).

Sources: PipeDream (Narayanan et al., SOSP 2019, §3.3: 1F1B, weight stashing, vertical sync),
PipeDream-2BW (Narayanan et al., ICML 2021, §3.1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulator.pipeline.schedules.action import Action, Schedule, _check
from simulator.pipeline.schedules.synchronous import one_f_one_b


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
