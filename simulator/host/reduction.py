"""A reduction among messages in flight: what the collectives' reductions cost on one host.

γ (``Device.reduce_Bps``) is calibrated as the α-β-γ model defines it (Thakur, Rabenseifner
and Gropp 2005; REFERENCES.md): ``a.add_(b)`` on 16 MiB buffers, every rank at once, nothing
else running. A collective's reductions run elsewhere: between a receive's end and the next
send, on bytes another core has just written, while the ring's other messages are copied
through the kernel. On the lab's two-core host that costs far more (benchmarks/NOTES.md, "A
reduction among messages"; ``benchmarks/reduction_among_messages.py``): four ranks each reducing
a 1 MiB message between the steps of the ring's shift added 0.5–0.6 ms a step where the same
reductions alone took 0.12 ms, 256 KiB ones 0.11–0.15 ms against 0.03. A ``fill_`` of the same
bytes cost half to three quarters of that, a busy loop of the reduction's length much less: what
it costs is mostly the memory the messages' copies also use, not the cores' time.

The calibration therefore times the reduction where the collectives run it — the shift posted
ahead whose every received message is reduced before the next send
(:func:`backends.primitives.reduce_ahead`, ``CalibrationEntry.reduce_ahead_times_s``) beside the
plain shift of the same bytes — and :func:`reduction_times` turns the pair into a reduction's
time by size, solved, as the bus is (:mod:`simulator.host.bus`), so that the simulated
primitive (:func:`reduce_ahead`) takes its measured time. The collectives' model prices every
reduction by that table (``Cluster.host.reduce_s_by_bytes``); no collective is measured to make it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from simulator.core.calibration import SHIFT_AHEAD_STEPS
from simulator.host.bus import CALLS

if TYPE_CHECKING:
    from simulator.core.comm import SimComm, SimGen
    from simulator.core.hardware import Cluster

ROUNDS = 3
"""Correction rounds of :func:`reduction_times` (one simulated primitive per round and size)."""


def reduce_ahead(comm: SimComm, nbytes: int, steps: int = SHIFT_AHEAD_STEPS) -> SimGen:
    """The calibration's reducing shift, simulated (:func:`backends.primitives.reduce_ahead`): the
    shift posted ahead among all ranks (:func:`simulator.host.bus.shift_ahead`), each
    received message reduced before the rank's next send."""
    from simulator.host.wakeup import chain_ahead

    if comm.world_size >= 2:
        yield from chain_ahead(comm, comm.world_size, nbytes, steps, reduced=True)


def reduce_ahead_s(cluster: Cluster, nbytes: int, calls: int = CALLS) -> float:
    """Simulated time of one step of :func:`reduce_ahead` of ``nbytes`` a message, ``calls``
    calls back to back, s."""
    from simulator.core.comm import run_spmd

    result = run_spmd(cluster, reduce_ahead, nbytes, trace=False, calls=calls)
    return result.makespan_s / (calls * SHIFT_AHEAD_STEPS)


def monotone(values: Sequence[float]) -> list[float]:
    """The non-decreasing sequence closest to ``values`` in least squares (pool adjacent
    violators, Ayer et al. 1955): a reduction of more bytes never takes less time, and two
    sizes measured out of order — each the difference of two medians — are averaged."""
    blocks: list[list[float]] = []  # [sum, count]
    for v in values:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return [total / count for total, count in blocks for _ in range(int(count))]


def reduction_times(build: Callable[[Sequence[tuple[float, float]]], Cluster],
                    sizes: Sequence[int], shift_s: Sequence[float],
                    reducing_s: Sequence[float], reduce_Bps: float
                    ) -> tuple[tuple[float, float], ...]:
    """A reduction's time by message size, ``((bytes, s), …)``, with which the cluster
    ``build(table)`` simulates the reducing shift of each size in its measured time.

    Starts from the measured difference, reducing shift less shift (``reducing_s``,
    ``shift_s``: one step each, s), never below the reduction alone (``n / reduce_Bps``);
    each round simulates every size and moves its time by what the simulated step missed
    the measured one by; the result is made non-decreasing in size (:func:`monotone`).
    Sizes of zero bytes or unmeasured (non-positive) times are left out; empty if none is
    left."""
    points = [(n, s, r) for n, s, r in zip(sizes, shift_s, reducing_s, strict=True)
              if n > 0 and s > 0 and r > 0]
    floor = {n: n / reduce_Bps for n, _, _ in points}
    table = {n: max(r - s, floor[n]) for n, s, r in points}
    for _ in range(ROUNDS):
        if not table:
            break
        cluster = build(sorted(table.items()))
        for n, _, target in points:
            missed = target - reduce_ahead_s(cluster, n)
            table[n] = max(table[n] + missed, floor[n])
    sizes_in = sorted(table)
    smooth = monotone([table[n] for n in sizes_in])
    return tuple((float(n), t) for n, t in zip(sizes_in, smooth, strict=True))
