"""The background thread's cycle in the α-β model: chapter 7's closed forms.

Book chapter 7, "The cycle on a timeline" ({eq}`eq-horovod-cycle`). Backward produces gradients
while the background thread, every ``c`` seconds at most, pops what is ready, negotiates
(``c₀`` s), and all-reduces the ready bytes fused up to the threshold, each fused all-reduce of
``n`` bytes costing ``a + n·β'`` (a ring: ``a = 2(p−1)α``, ``β' = 2(p−1)/p·β``). A cycle that
takes longer than ``c`` is followed at once by the next one, so under load the thread is clocked
by its own work. With ``N`` bytes arriving at a steady rate over ``T_b`` the busy cycle settles
where it all-reduces what arrived during itself::

    L = (a + c₀) / (1 − N·β'/T_b),        x = N·L/T_b = (a + c₀) / (T_b/N − β')

(:func:`cycle_fixed_point`), a fixed point only if backward is slower than the network per
byte and ``L > c``. :func:`cycle_timeline` steps the same loop cycle by cycle for gradients that
arrive in lumps (one per tensor, the real case, fused with :func:`~simulator.horovod.fusion.
fuse_responses`); :func:`uniform_cycle_timeline` for bytes that arrive as a steady stream (the
chapter's table). With contention-free links, no copies and no shared cores,
:func:`simulator.horovod.step.predict_step` equals :func:`cycle_timeline` (tests check it).

Units: seconds, bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simulator.horovod.fusion import Response, fuse_responses


def ring_cost(p: int, alpha_s: float, beta_s_per_B: float) -> tuple[float, float]:
    """``(a, β')`` of a ring all-reduce on ``p`` ranks: ``a + n·β'`` seconds for ``n`` bytes
    ({eq}`eq-ar-ring` without γ)."""
    if p < 1:
        raise ValueError(f"a ring needs p ≥ 1 ranks, got {p}")
    return 2 * (p - 1) * alpha_s, 2 * (p - 1) / p * beta_s_per_B


def cycle_fixed_point(nbytes: float, backward_s: float, a_s: float, beta_prime_s_per_B: float,
                      negotiation_s: float = 0.0) -> tuple[float, float] | None:
    """``(L, x)``: the self-clocked cycle length, s, and the bytes fused per cycle.

    ``None`` when there is no fixed point: backward produces bytes faster than the ring
    carries them (``T_b/N ≤ β'``), and the queue grows until the threshold caps each cycle.
    """
    per_byte = backward_s / nbytes - beta_prime_s_per_B
    if not per_byte > 0:
        return None
    x = (a_s + negotiation_s) / per_byte
    return x * backward_s / nbytes, x


@dataclass(frozen=True)
class CycleTimeline:
    """What the stepped cycle model gives (times from the start of backward, s).

    Attributes:
        cycle_starts_s: when each cycle began (it pops the queue then).
        all_reduces: ``(start, end, bytes)`` of each fused all-reduce, in order.
        last_end_s: end of the last all-reduce.
        backward_end_s: when the last gradient arrived.
    """

    cycle_starts_s: list[float]
    all_reduces: list[tuple[float, float, int]]
    last_end_s: float
    backward_end_s: float

    @property
    def cycles(self) -> int:
        """Cycles run until every byte was reduced."""
        return len(self.cycle_starts_s)

    @property
    def exposed_s(self) -> float:
        """Communication left after backward: end of the last all-reduce − end of backward."""
        return max(self.last_end_s - self.backward_end_s, 0.0)

    @property
    def mean_fused_bytes(self) -> float:
        """Bytes per fused all-reduce, on average."""
        return sum(n for *_, n in self.all_reduces) / max(len(self.all_reduces), 1)


def cycle_timeline(arrivals: Sequence[tuple[float, int]], cycle_s: float,
                   negotiation_s: float, all_reduce_s: Callable[[int], float],
                   threshold_bytes: int, pop_delay_s: float = 0.0) -> CycleTimeline:
    """Step the background thread over gradients that arrive in lumps.

    ``arrivals[i] = (time, bytes)`` of tensor ``i``, in the order the ranks agree on. Cycle
    ``k`` starts at ``max(start_{k−1} + c, end of cycle k−1's work)`` (the first at 0), takes
    every tensor that arrived by its start (+ ``pop_delay_s``), negotiates for
    ``negotiation_s``, then all-reduces the fused responses one after another.
    """
    if not cycle_s >= 0 or not negotiation_s >= 0:
        raise ValueError("the cycle time and the negotiation cost must be ≥ 0 s")
    tensors = [Response(str(i), n) for i, (_, n) in enumerate(arrivals)]
    t, taken, starts = 0.0, 0, []
    reduces: list[tuple[float, float, int]] = []
    while taken < len(arrivals):
        if cycle_s + negotiation_s == 0 and arrivals[taken][0] > t + pop_delay_s:
            t = arrivals[taken][0] - pop_delay_s  # a free loop would spin: skip to the next
        start = t
        starts.append(start)
        ready = taken
        while ready < len(arrivals) and arrivals[ready][0] <= start + pop_delay_s:
            ready += 1
        t = start + negotiation_s
        for group in fuse_responses(tensors[taken:ready], threshold_bytes):
            size = sum(r.nbytes for r in group)
            end = t + all_reduce_s(size)
            reduces.append((t, end, size))
            t = end
        taken = ready
        t = max(start + cycle_s, t)
    last = reduces[-1][1] if reduces else 0.0
    backward_end = max((a for a, _ in arrivals), default=0.0)
    return CycleTimeline(starts, reduces, last, backward_end)


def uniform_cycle_timeline(nbytes: float, backward_s: float, a_s: float,
                           beta_prime_s_per_B: float, cycle_s: float, negotiation_s: float,
                           threshold_bytes: float, pop_delay_s: float = 0.0) -> CycleTimeline:
    """:func:`cycle_timeline` for ``nbytes`` arriving as a steady stream over ``backward_s``.

    The bytes ready at time ``t`` are ``N·min(t, T_b)/T_b``; a cycle reduces all of them not
    yet reduced, cut into pieces of at most the threshold. The chapter's table uses
    ``pop_delay_s = c₀`` (it counts the bytes ready at the *end* of negotiation); Horovod pops
    its queue at the start of the cycle, ``pop_delay_s = 0``.
    """
    if not (nbytes > 0 and backward_s > 0 and threshold_bytes > 0):
        raise ValueError("the stream needs bytes > 0, a backward time > 0 and a threshold > 0")
    t, done, starts = 0.0, 0.0, []
    reduces: list[tuple[float, float, int]] = []
    while done < nbytes * (1 - 1e-12):
        start = t
        starts.append(start)
        t = start + negotiation_s
        left = nbytes * min(start + pop_delay_s, backward_s) / backward_s - done
        while left > nbytes * 1e-12:
            piece = min(left, threshold_bytes)
            end = t + a_s + piece * beta_prime_s_per_B
            reduces.append((t, end, math.ceil(piece)))
            t, done, left = end, done + piece, left - piece
        t = max(start + cycle_s, t)
    return CycleTimeline(starts, reduces, reduces[-1][1] if reduces else 0.0, backward_s)
