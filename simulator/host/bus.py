"""The loopback bus's rate by load, calibrated so that the simulated exchange takes the measured
time.

Ranks on one host move every message through the CPUs' caches: the sender's kernel copies it
into a socket buffer, the receiver's copies it out. While the bytes in flight fit in the caches
the copies run at cache speed; once they do not, at the speed of memory, which all copies share.
On the lab's two-core machine two 512 KiB messages crossing at once (one each way) moved their
bytes at about 12 GB/s in all (their waits aside), two 8 MiB ones at 4.6 GB/s
(benchmarks/NOTES.md, "Chapter 2's measurement history"). A single rate fitted to large
exchanges prices the mid-size steps of every collective at the speed of memory.

The calibration's *concurrent exchange* (:func:`backends.primitives.pair_exchange`: rank ``r`` swaps
``n`` bytes with ``r xor 1``, every pair at once, receive posted first, timed back to back)
measures the bus at loads ``f·n`` (``f`` messages in flight). :func:`bus_rates` turns those
times into the bus's rate by load (:attr:`simulator.core.network.LinkEffects.bandwidth_by_load`):
the rate at load ``f·n`` is what makes the simulated exchange, posted and timed as it was
measured (:func:`pair_exchange`), take the measured time — the same self-consistency that
:mod:`simulator.host.wakeup` gives the latency table.

Which exchange the rates are solved from matters where sends wait for the receiver's
receive-ready notice (gloo's, :attr:`ClusterEffects.receiver_driven_sends`). In the plain exchange
each rank posts its receive just before its send, so every simulated send waits for the
partner's notice; priced as the calibration measures it (tens of µs among four ranks on two
cores) that wait leaves less of the measured time to the bytes, the solved bus is faster than
the bytes ever moved, and a ring's steps — whose receives are posted a step ahead and never
wait — inherit it. Where the calibration has it, the rates are solved from the ring's shift
posted ahead instead (:func:`shift_ahead`, :attr:`CalibrationEntry.shift_ahead_times_s`): the
same sizes sent round the ring and posted the way a ring posts its steps, so that the notice
is paid in the solve exactly as often as in the ring, and — with three or more ranks — each
connection carries one direction, as a ring's do. (A pair's exchange posted ahead pays
something a ring does not: a send written at once by the calling thread holds the connection
that the partner's message must be read from; benchmarks/NOTES.md, "Who writes the bytes".)

That is priced apart (:func:`connection_rates`): with three ranks or more the calibration also
times the same messages swapped between partners and posted the same way
(:attr:`CalibrationEntry.swap_ahead_times_s`), and where the swap, simulated over the bus
solved from the shift, comes out faster than it ran, each pair's connection
(:meth:`Topology.shared_bus`'s ``connection_by_load``) gets the rate, at the swap's load, that
makes it take the measured time — recursive doubling's steps are such swaps, a ring's are not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from simulator.core.calibration import SHIFT_AHEAD_STEPS

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


def shift_ahead(comm: SimComm, nbytes: int, steps: int = SHIFT_AHEAD_STEPS) -> SimGen:
    """The calibration's shift posted ahead, simulated (:func:`backends.primitives.shift_ahead`):
    the chain posted ahead among all ranks (:func:`simulator.host.wakeup.chain_ahead`) with
    messages of ``nbytes`` and ``steps`` steps."""
    from simulator.host.wakeup import chain_ahead

    if comm.world_size >= 2:
        yield from chain_ahead(comm, comm.world_size, nbytes, steps)


def swap_ahead(comm: SimComm, nbytes: int, steps: int = SHIFT_AHEAD_STEPS) -> SimGen:
    """The calibration's swap posted ahead, simulated (:func:`backends.primitives.swap_ahead`):
    :func:`shift_ahead` with ``rank xor 1`` on both sides (a rank without a partner stays
    out)."""
    from simulator.host.wakeup import posted_ahead

    peer = comm.rank ^ 1
    if peer < comm.world_size:
        yield from posted_ahead(comm, peer, peer, nbytes, steps)


def exchange_s(cluster: Cluster, nbytes: int, calls: int = CALLS, ahead: bool = False,
               swap: bool = False) -> float:
    """Simulated time of one concurrent exchange of ``nbytes`` per message, ``calls`` run back
    to back (``ahead``: calls of the shift posted ahead, time per step; with ``swap``, of
    the swap posted ahead), s."""
    from simulator.core.comm import run_spmd

    if ahead:
        program = swap_ahead if swap else shift_ahead
        return run_spmd(cluster, program, nbytes, trace=False, calls=calls
                        ).makespan_s / (calls * SHIFT_AHEAD_STEPS)
    return run_spmd(cluster, pair_exchange, nbytes, trace=False,
                    calls=calls).makespan_s / calls


def bus_rates(build: Callable[[Sequence[tuple[float, float]]], Cluster], sizes: Sequence[int],
              times_s: Sequence[float], flows: int,
              ahead: bool = False) -> tuple[tuple[float, float], ...]:
    """The bus's rate by load, ``((flows·n, Bps), …)``, with which the cluster
    ``build(table)`` simulates each measured exchange of ``n`` bytes per message in its
    measured time (``times_s``, s; ``ahead``: the shift posted ahead, time per step, with
    ``flows`` its messages in flight).

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
            simulated = exchange_s(cluster, int(load // flows), ahead=ahead)
            fixed = simulated - load / table[load]
            on_bytes = target - fixed
            if on_bytes < MIN_BYTES_SHARE * target:
                del table[load]
            else:
                table[load] = load / on_bytes
    return tuple(sorted(table.items()))


SEARCH_STEPS = 14
"""Bisection steps of :func:`connection_rates` per size, over a thousandfold range of rates
(the rate found is within 0.05 % of the one that fits)."""


def _bisect(lo: float, hi: float, steps: int, up: Callable[[float], bool]
            ) -> tuple[float, float]:
    """Geometric bisection of ``[lo, hi]``: ``steps`` times, keep the upper half where
    ``up(mid)`` (the value sought is above ``mid``), else the lower; the last bracket."""
    for _ in range(steps):
        mid = (lo * hi) ** 0.5
        if up(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def connection_rates(build: Callable[[Sequence[tuple[float, float]]], Cluster],
                     sizes: Sequence[int], times_s: Sequence[float]
                     ) -> tuple[tuple[float, float], ...]:
    """A connection's rate by load, ``((2·n, Bps), …)``, with which the cluster
    ``build(table)`` simulates the swap posted ahead of ``n`` bytes per message
    (:func:`swap_ahead`) in its measured time (``times_s``, s, one step).

    A size whose swap the cluster without connections (``build(())``) already simulates in
    its measured time or less gets no limit (:data:`simulator.core.network.UNLIMITED_Bps`):
    the two directions do not slow each other there. Otherwise its rate is found by
    bisection — the simulated swap is slower the slower the connection — between a rate at
    which its bytes alone would take the whole measured time and a thousand times that; and
    kept only if at that rate the swap's bytes fill :data:`MIN_BYTES_SHARE` of its measured
    time or more (as :func:`bus_rates` keeps a size). Empty when no size is slower than the
    cluster without connections makes it."""
    from simulator.core.network import UNLIMITED_Bps

    free = build(())
    points = [(2 * n, n, t) for n, t in sorted(zip(sizes, times_s, strict=True))
              if n > 0 and t > 0]
    slower = [(load, n, t) for load, n, t in points
              if exchange_s(free, n, ahead=True, swap=True) < t]
    if not slower:
        return ()
    table = {load: UNLIMITED_Bps for load, *_ in points}

    def too_slow(load: int, n: int, target: float, rate: float) -> bool:
        table[load] = rate
        return exchange_s(build(sorted(table.items())), n, ahead=True, swap=True) > target

    for load, n, target in slower:
        # between a rate too slow for the target and a thousand times it
        _, hi = _bisect(load / target, 1e3 * load / target, SEARCH_STEPS,
                        partial(too_slow, load, n, target))
        # a swap that its bytes at that rate would fill less than MIN_BYTES_SHARE of waited
        # longer than simulated, it did not move slower: no rate is solved from a wait
        table[load] = hi if load / hi >= MIN_BYTES_SHARE * target else UNLIMITED_Bps
    return tuple(sorted(table.items()))


MAX_QUEUED_WEIGHT = 8.0
"""The heaviest a queued send's byte may be solved to weigh (:func:`queued_weights`)."""
WEIGHT_SEARCH_STEPS = 10
"""Bisection steps of :func:`queued_weights` per size, between 1 and
:data:`MAX_QUEUED_WEIGHT` (the weight found is within 0.2 % of the one that fits)."""


def queued_weights(build: Callable[[Sequence[tuple[float, float]]], Cluster],
                   sizes: Sequence[int], times_s: Sequence[float]
                   ) -> tuple[tuple[float, float], ...]:
    """A queued send's weight by message size, ``((n, weight), …)``
    (:attr:`ClusterEffects.queued_weight_by_bytes`), with which the cluster ``build(table)``
    simulates the calibration's plain exchange of ``n`` bytes per message
    (:func:`pair_exchange`, timed back to back) in its measured time (``times_s``, s).

    In the plain exchange each rank posts its send right after its receive, so every send is
    queued (:class:`simulator.core.comm.SimComm`); the weights are solved by
    :func:`weights_by_size`."""
    return weights_by_size(build, sizes, times_s, exchange_s)


def weights_by_size(build: Callable[[Sequence[tuple[float, float]]], Cluster],
                    sizes: Sequence[int], times_s: Sequence[float],
                    simulate: Callable[[Cluster, int], float]
                    ) -> tuple[tuple[float, float], ...]:
    """A weight by message size, ``((n, weight), …)``, with which ``simulate(build(table),
    n)`` — a primitive that is slower the heavier its bytes — takes its measured time
    (``times_s``, s) at each of ``sizes``: 1 where the cluster without weights
    (``build(())``) already takes that long or longer, else found by bisection between 1 and
    :data:`MAX_QUEUED_WEIGHT`, and kept only if the primitive's bytes fill
    :data:`MIN_BYTES_SHARE` of its measured time or more (as :func:`bus_rates` keeps a
    size). Empty when every size weighs 1 (:func:`queued_weights`,
    :func:`simulator.host.pingpong.stream_weights`)."""
    free = build(())
    points = [(n, t) for n, t in sorted(zip(sizes, times_s, strict=True)) if n > 0 and t > 0]
    table = {float(n): 1.0 for n, _ in points}

    def too_fast(n: int, target: float, weight: float) -> bool:
        table[float(n)] = weight
        return simulate(build(sorted(table.items())), n) <= target

    for n, target in points:
        simulated = simulate(free, n)
        if simulated >= target:
            continue
        lo, _ = _bisect(1.0, MAX_QUEUED_WEIGHT, WEIGHT_SEARCH_STEPS, partial(too_fast, n, target))
        # the bytes' time at weight w is about w/(w − 1) of what the weight added: a size
        # whose bytes would fill less than MIN_BYTES_SHARE of it waited, it did not move slower
        added = target - simulated
        bytes_s = added * lo / (lo - 1.0) if lo > 1.0 else 0.0
        table[float(n)] = lo if bytes_s >= MIN_BYTES_SHARE * target else 1.0
    return tuple(sorted(table.items())) if any(w > 1.0 for w in table.values()) else ()
