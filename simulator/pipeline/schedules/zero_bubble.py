"""Zero-bubble schedules: ZB-H1, ZB-V and DualPipe-V, with the backward split into I and W.

Each function returns a :data:`~simulator.pipeline.schedules.action.Schedule` of ``F``,
``I`` (input gradient), ``W`` (weight gradient) and — DualPipe-V only — fused ``B`` actions
(:mod:`~simulator.pipeline.schedules.split_backward`). The tables are
:func:`~simulator.pipeline.schedules.split_backward.draw_split`'s output (``F``, ``I``, ``W``
one tick each), and the tests check them literally.

Sources: Qi, Wan, Huang, Lin, "Zero Bubble Pipeline Parallelism" (ICLR 2024): §3 the
handcrafted ZB-H1, §6 the V-shaped ZB-V; DeepSeek-AI, "DeepSeek-V3 Technical Report" (2024),
§3.2.1 DualPipe, in its V-shaped "cut-in-half" form DualPipe-V (two chunks per rank placed as
ZB-V, one direction of micro-batches). ``torch.distributed.pipelining`` implements the same
three (``ScheduleInterleavedZeroBubble`` with one stage per rank, ``ScheduleZBVZeroBubble``,
``ScheduleDualPipeV``); ``tests/backends/test_zero_bubble.py`` compares the orders.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.pipeline.schedules.action import Action, Schedule, _check


def zb_h1(stages: int, microbatches: int) -> Schedule:
    """ZB-H1 (Qi et al. 2024, §3.1): 1F1B with ``W`` deferred into the cool-down bubble.

    Rank ``r`` warms up with ``min(p − r − 1, m)`` forwards like 1F1B, then runs, for each
    micro-batch ``k``, the next forward (if any) and ``I(k)`` — the input gradient the
    previous stage waits for — followed by ``W(k − r)``: rank ``r`` keeps ``r`` weight
    gradients back and runs them last, where 1F1B's cool-down would leave it idle. No
    rank holds more than ``p`` micro-batches (``F`` to ``W``): the same peak as 1F1B's first
    rank. With ``T_F = T_I = T_W`` the bubble falls from 1F1B's ``(p − 1)(T_F + T_I + T_W)``
    to ``(p − 1)(T_F + T_I − T_W)`` (§3.1). ``draw_split(zb_h1(3, 4))``::

        rank 0: F0 F1 F2 .  .  I0 W0 F3 I1 W1 I2 W2 I3 W3
        rank 1: .  F0 F1 .  I0 F2 I1 W0 F3 I2 W1 I3 W2 W3
        rank 2: .  .  F0 I0 F1 I1 F2 I2 W0 F3 I3 W1 W2 W3
    """
    _check(stages, microbatches)
    schedule = []
    for rank in range(stages):
        warmup = min(stages - rank - 1, microbatches)
        actions = [Action("F", i) for i in range(warmup)]
        for k in range(microbatches):
            if warmup + k < microbatches:
                actions.append(Action("F", warmup + k))
            actions.append(Action("I", k))
            if k >= rank:
                actions.append(Action("W", k - rank))
        actions += [Action("W", k) for k in range(max(microbatches - rank, 0), microbatches)]
        schedule.append(actions)
    return schedule


class _Counters:
    """The next micro-batch of each (kind, chunk) on one rank, and the ``I`` s whose ``W`` is
    still to run, oldest first."""

    def __init__(self, microbatches: int) -> None:
        self.m = microbatches
        self.next: dict[tuple[str, int], int] = {}
        self.pending_w: list[tuple[int, int]] = []  # (chunk, micro-batch)
        self.actions: list[Action] = []

    def add(self, kind: str, chunk: int) -> None:
        """Run ``kind`` of the chunk's next micro-batch; ``B`` counts as its ``I`` and ``W``."""
        key = ("I" if kind == "B" else kind, chunk)
        i = self.next.get(key, 0)
        self.next[key] = i + 1
        if kind == "B":
            self.next[("W", chunk)] = self.next.get(("W", chunk), 0) + 1
        if kind == "I":
            self.pending_w.append((chunk, i))
        self.actions.append(Action(kind, i, chunk))

    def weight(self, chunk: int | None = None) -> None:
        """Run the oldest pending ``W`` (of ``chunk``, if given), if there is one."""
        for n, (c, i) in enumerate(self.pending_w):
            if chunk is None or c == chunk:
                del self.pending_w[n]
                self.actions.append(Action("W", i, c))
                return

    def count(self, kind: str, chunk: int) -> int:
        return self.next.get((kind, chunk), 0)

    def real(self) -> list[Action]:
        """The actions of real micro-batches (those ``< m``)."""
        return [a for a in self.actions if a.microbatch < self.m]


def zb_v(stages: int, microbatches: int) -> Schedule:
    """ZB-V (Qi et al. 2024, §6): two chunks per rank in a V, ``W`` filling the bubbles.

    Rank ``r`` holds stage ``r`` (chunk 0) and stage ``2p − 1 − r`` (chunk 1, ``.1`` in the
    table), so the last stage sits on rank 0 beside the first. Rank ``r`` runs:

    1. ``2(p − r) − 1`` forwards of chunk 0;
    2. ``r`` times: a forward of chunk 1, then one of chunk 0;
    3. ``p − r`` times ``F I W`` of chunk 1 (its first micro-batches have come back);
    4. steady state: ``F I W`` of chunk 0 (``F`` only while forwards remain), then of chunk 1,
       until every forward has run;
    5. cool-down: ``r`` times ``I`` of chunk 0 then of chunk 1 (their ``W`` deferred),
       ``p − r`` times ``I`` and the oldest deferred ``W`` of chunk 0, then the deferred
       ``W`` s of chunk 1, then of chunk 0.

    The phases assume ``m ≥ 2p − 1``; with fewer, they run with ``2p − 1`` and the actions of
    the micro-batches that do not exist are dropped. Peak activations (``m ≥ 2p − 1``):
    ``2p`` chunk micro-batches on every rank — ``p`` micro-batches of a ZB-H1 stage twice the
    size, 1F1B's peak (§6) — and no bubble in steady state when ``T_F = T_I = T_W``. ``draw_split(zb_v(2, 4), "v")``::

        rank 0: F0   F1   F2   F0.1 I0.1 W0.1 F1.1 I1.1 W1.1 F3   I0   W0   F2.1 I2.1 W2.1 I1   W1   F3.1 I3.1 W3.1 I2   W2   I3   W3   .
        rank 1: .    F0   F0.1 F1   F1.1 I0.1 W0.1 F2   I0   W0   F2.1 I1.1 W1.1 F3   I1   W1   F3.1 I2.1 W2.1 I2   I3.1 I3   W2   W3.1 W3
    """  # noqa: E501
    _check(stages, microbatches)
    n = max(2 * stages - 1, microbatches)
    schedule = []
    for rank in range(stages):
        c = _Counters(microbatches)
        for _ in range(2 * (stages - rank) - 1):
            c.add("F", 0)
        for _ in range(rank):
            c.add("F", 1)
            c.add("F", 0)
        for _ in range(stages - rank):
            c.add("F", 1)
            c.add("I", 1)
            c.weight(1)
        while c.count("F", 1) < c.count("F", 0) or c.count("F", 0) < n:
            if c.count("F", 0) < n:
                c.add("F", 0)
            c.add("I", 0)
            c.weight(0)
            c.add("F", 1)
            c.add("I", 1)
            c.weight(1)
        for _ in range(rank):
            c.add("I", 0)
            c.add("I", 1)
        for _ in range(stages - rank):
            c.add("I", 0)
            c.weight(0)
        while any(ch == 1 for ch, _ in c.pending_w):
            c.weight(1)
        while c.pending_w:
            c.weight(0)
        schedule.append(c.real())
    return schedule


def dualpipe_v(stages: int, microbatches: int) -> Schedule:
    """DualPipe-V (DeepSeek-V3 report 2024, §3.2.1, cut in half): ZB-V's placement, with
    a forward of one chunk paired with a backward of the other in the steady state.

    DualPipe pairs a forward and a backward chunk so that one's communication hides behind
    the other's computation; the V form runs one direction of micro-batches on ZB-V's
    placement. Rank ``r`` runs, in pairs ``(F, B)`` written as the forward then the fused
    backward (on a CPU the pair runs one after the other):

    1. ``2(p − r − 1)`` forwards of chunk 0;   2. ``r + 1`` times ``F`` of chunk 0, of chunk 1;
    3. ``p − r − 1`` times ``I`` of chunk 1, the oldest deferred ``W``, ``F`` of chunk 1;
    4. ``m − 2p + r + 1`` times the pairs ``(F chunk 0, B chunk 1)``, ``(F chunk 1, B chunk
       0)`` — on the last rank the first pair is simply ``F`` then ``B``;
    5. ``p − r − 1`` times ``B`` of chunk 1, then the pair ``(F chunk 1, B chunk 0)``;
    6. ``r + 1`` times a backward of chunk 1, then of chunk 0: fused ``B`` for the first
       half, split ``I`` after (an odd rank switches before chunk 1, an even one between);
    7. ``p − r − 1`` times the oldest deferred ``W``, then a backward of chunk 0;
    8. the ``r + 1`` remaining deferred ``W`` s.

    Needs ``m ≥ 2p``. Peak activations: ``2p + 1`` chunk micro-batches on every rank, one more
    than ZB-V (the pair's forward runs before its backward frees). ``draw_split(dualpipe_v(2, 4), "v")`` (``B`` takes two ticks)::

        rank 0: F0   F1   F2   F0.1 I0.1 W0.1 F1.1 F3   B1.1 B1.1 F2.1 B0   B0   B2.1 B2.1 F3.1 .    B1   B1   B3.1 B3.1 I2   W2   I3   W3
        rank 1: .    F0   F0.1 F1   F1.1 F2   B0.1 B0.1 F2.1 B0   B0   F3   B1.1 B1.1 F3.1 B1   B1   B2.1 B2.1 B2   B2   I3.1 I3   W3.1 W3
    """  # noqa: E501
    _check(stages, microbatches)
    if microbatches < 2 * stages:
        raise ValueError(f"DualPipe-V needs at least 2·{stages} = {2 * stages} micro-batches "
                         f"(one per stage), got {microbatches}")
    p, m = stages, microbatches
    schedule = []
    for rank in range(p):
        c = _Counters(m)
        for _ in range(2 * (p - rank - 1)):
            c.add("F", 0)
        for _ in range(rank + 1):
            c.add("F", 0)
            c.add("F", 1)
        for _ in range(p - rank - 1):
            c.add("I", 1)
            c.weight()
            c.add("F", 1)
        for _ in range(m - 2 * p + rank + 1):
            c.add("F", 0)
            c.add("B", 1)
            c.add("F", 1)
            c.add("B", 0)
        for _ in range(p - rank - 1):
            c.add("B", 1)
            c.add("F", 1)
            c.add("B", 0)
        split = False
        for k in range(rank + 1):
            if k == (rank + 1) // 2 and rank % 2 == 1:
                split = True
            c.add("I" if split else "B", 1)
            if k == (rank + 1) // 2 and rank % 2 == 0:
                split = True
            c.add("I" if split else "B", 0)
        for _ in range(p - rank - 1):
            c.weight()
            c.add("I" if split else "B", 0)
        for _ in range(rank + 1):
            c.weight()
        schedule.append(c.actions)
    return schedule


ZERO_BUBBLE: dict[str, tuple[Callable[[int, int], Schedule], str]] = {
    "zb_h1": (zb_h1, "loop"),
    "zbv": (zb_v, "v"),
    "dualpipev": (dualpipe_v, "v"),
}
"""Each zero-bubble schedule by name, with its placement."""


def zb_h1_bubble_s(stages: int, forward_s: float, input_s: float, weight_s: float) -> float:
    """ZB-H1's bubble per rank with equal stages and free communication, s (Qi et al. 2024,
    §3.1): ``(p − 1)(T_F + T_I − T_W)`` where ``T_W ≤ T_I`` (the paper's case), against 1F1B's
    ``(p − 1)(T_F + T_I + T_W)`` (``T_I`` the input-gradient part of the backward, ``T_W`` the
    weight-gradient part), for ``m ≥ p``. The step ends at the later of two branches after the
    last stage's last ``I``: its ``p`` held-back ``W`` (``p·T_W``) and the last gradient's way
    back to stage 0 and its ``W`` (``(p − 1)T_I + T_W``); so with ``T_W > T_I`` the bubble stops
    falling at ``(p − 1)T_F``, the start-up that no flushed schedule avoids:
    ``(p − 1)(T_F + max(T_I − T_W, 0))``. Exact where ``T_I ≤ T_F`` or ``T_W ≤ T_F``; where
    both exceed ``T_F`` a stage's own ``W`` delays its next ``I`` and this is a lower bound."""
    return (stages - 1) * (forward_s + max(input_s - weight_s, 0.0))


def zb_h1_time_s(stages: int, microbatches: int, forward_s: float, input_s: float,
                 weight_s: float) -> float:
    """ZB-H1's step time under the same assumptions: ``m(T_F + T_I + T_W)`` of work plus
    :func:`zb_h1_bubble_s`, s."""
    return (microbatches * (forward_s + input_s + weight_s)
            + zb_h1_bubble_s(stages, forward_s, input_s, weight_s))
