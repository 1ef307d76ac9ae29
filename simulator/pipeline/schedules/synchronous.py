"""The synchronous schedules, flushed every mini-batch: GPipe, 1F1B and interleaved 1F1B.

Each function returns a :data:`~simulator.pipeline.schedules.action.Schedule`: per rank, the
ordered :class:`~simulator.pipeline.schedules.action.Action` s it runs. The tables in the
docstrings are :func:`~simulator.pipeline.schedules.critical_path.draw`'s output, and the
tests check them literally. Also torchgpipe's forward clock, :func:`clock_cycles`.

Sources: GPipe (Huang et al., NeurIPS 2019), torchgpipe (Kim et al. 2020, §3.2
``clock_cycles``), PipeDream-Flush (Narayanan et al., ICML 2021), Megatron-LM interleaved 1F1B
(Narayanan et al., SC 2021, §2.2).
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.pipeline.schedules.action import Action, Schedule, _check


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
