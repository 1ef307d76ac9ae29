"""The loopback bus's rate by load, calibrated so that the simulated exchange takes the measured
time.

Ranks on one host move every message through the CPUs' caches: the sender's kernel copies it
into a socket buffer, the receiver's copies it out. While the bytes in flight fit in the caches
the copies run at cache speed; once they do not, at the speed of memory, which all copies share.
On the lab's two-core machine two 512 KiB messages crossing at once (one each way) moved their
bytes at about 12 GB/s in all (their waits aside), two 8 MiB ones at 4.6 GB/s (chapter 2,
"What the formulas miss"). A single rate fitted to large exchanges prices the mid-size steps
of every collective at the speed of memory.

The calibration's *concurrent exchange* (:func:`lab.calibrate.pair_exchange`: rank ``r`` swaps
``n`` bytes with ``r xor 1``, every pair at once, receive posted first, timed back to back)
measures the bus at loads ``f·n`` (``f`` messages in flight). :func:`bus_rates` turns those
times into the bus's rate by load (:attr:`simulator.core.network.Link.bandwidth_by_load`):
the rate at load ``f·n`` is what makes the simulated exchange, posted and timed as it was
measured (:func:`pair_exchange`), take the measured time — the same self-consistency that
:mod:`simulator.core.wakeup` gives the latency table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.core.comm import SimComm, SimGen
    from simulator.core.hardware import Cluster

ROUNDS = 3
"""Rescaling rounds of :func:`bus_rates` (one simulated exchange per round and size)."""
CALLS = 4
"""Exchanges simulated back to back to time one, as the calibration times them back to back."""
MIN_BYTES_SHARE = 0.25
"""A size whose measured exchange is less than this share bytes (the rest the simulated
latencies and posts) fixes no rate: its time says how long the messages waited, not how fast
they moved, and a rate solved from it would amplify the noise of the wait."""


def pair_exchange(comm: SimComm, nbytes: int) -> SimGen:
    """The calibration's concurrent exchange, simulated: post the receive from ``rank xor 1``,
    send to it, wait for both (a rank without a partner stays out)."""
    peer = comm.rank ^ 1
    if peer >= comm.world_size:
        return
    works = (comm.irecv(peer, nbytes), comm.isend(peer, nbytes))
    for work in works:
        yield work.wait()


def exchange_s(cluster: Cluster, nbytes: int, calls: int = CALLS) -> float:
    """Simulated time of one concurrent exchange of ``nbytes`` per message, ``calls`` run back
    to back, s."""
    from simulator.core.comm import run_spmd

    return run_spmd(cluster, pair_exchange, nbytes, trace=False,
                    calls=calls).makespan_s / calls


def bus_rates(build: Callable[[Sequence[tuple[float, float]]], Cluster], sizes: Sequence[int],
              times_s: Sequence[float], flows: int) -> tuple[tuple[float, float], ...]:
    """The bus's rate by load, ``((flows·n, Bps), …)``, with which the cluster
    ``build(table)`` simulates each measured exchange of ``n`` bytes per message in its
    measured time (``times_s``, s).

    Each round simulates every size and solves ``t = fixed + flows·n / rate`` for the rate,
    ``fixed`` being the simulated time less the bytes' share at the current rate; sizes whose
    bytes are less than :data:`MIN_BYTES_SHARE` of the measured time are left out. Empty when
    no size qualifies (then the caller keeps its single rate)."""
    points = sorted((flows * n, t) for n, t in zip(sizes, times_s, strict=True)
                    if n > 0 and t > 0)
    table = {load: load / t for load, t in points}  # as if all the time were bytes: too slow
    for _ in range(ROUNDS):
        cluster = build(sorted(table.items()))
        for load, target in points:
            if load not in table:
                continue
            simulated = exchange_s(cluster, int(load // flows))
            fixed = simulated - load / table[load]
            on_bytes = target - fixed
            if on_bytes < MIN_BYTES_SHARE * target:
                del table[load]
            else:
                table[load] = load / on_bytes
    return tuple(sorted(table.items()))
