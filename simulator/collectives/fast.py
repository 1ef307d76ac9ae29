"""Exact fast paths: a collective's makespan for tens of thousands of ranks without a SimPy
process per rank.

The per-rank engine (:func:`~simulator.core.comm.run_spmd`) runs every rank program and every
message as events. For these collectives the answer follows from far less, *exactly* (equal to
the events to rounding), on the clusters where the reasoning below holds:

* :func:`ring_all_reduce_fast` — :func:`~simulator.collectives.all_reduce.ring_all_reduce`;
  :func:`ring_phases_fast` with one phase — the ring reduce-scatter and all-gather;
* :func:`recursive_doubling_fast` —
  :func:`~simulator.collectives.all_reduce.recursive_doubling_all_reduce`, ``p = 2^k`` in
  lockstep; any ``p``, the fold replayed: :mod:`~simulator.collectives.fast_fold`;
* the binary and double binary tree all-reduces: :mod:`~simulator.collectives.fast_trees`;
* the binomial broadcast and reduce from rank 0: :mod:`~simulator.collectives.fast_binomial`.

**When a message's time is known in advance.** On a textbook-tier cluster (no host effects:
``Cluster.host`` and every ``Link.host`` are ``None``) a message that shares no ``fifo`` or
``fair`` channel with another message in flight takes ``α_path + n/B_path``: the route's
latencies summed, then its bytes at the slowest link's bandwidth (``none`` channels never
interact; :mod:`~simulator.collectives.fast_routes`). A ring rank sends one message at a
time, always to ``r + 1``: if no contended channel is crossed by the ring messages of two
different senders, no two messages ever share one, however far the ranks drift apart
(:func:`ring_send_links`). Recursive doubling pairs ``r`` with ``r XOR d``; it qualifies when
the messages of each step share no contended channel and all take the same time — then every
rank starts each step at the same instant, by induction (:func:`doubling_send_links`). The
other modules say when theirs hold; one tree also replays two siblings sharing a port.

:func:`fast_path` says which applies: it returns a function ``nbytes, itemsize -> seconds``,
or ``None`` where the events must run (host effects, a fat tree's shared spines, a fold whose
late ranks meet early ones on a contended port). :func:`ring_phases_fast` is also the
estimate the ZeRO and Megatron step models use on any cluster (see there).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from simulator.collectives.exchange import buffer_nbytes, chunk_nbytes
from simulator.collectives.fast_binomial import (
    binomial_broadcast_fast,
    binomial_links,
    binomial_reduce_fast,
)
from simulator.collectives.fast_fold import fold_links, folded_doubling_fast
from simulator.collectives.fast_routes import send_links
from simulator.collectives.fast_trees import (
    TreeLinks,
    binary_tree_fast,
    binary_tree_links,
    double_binary_tree_fast,
    double_binary_tree_links,
)
from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.core.hardware import Cluster

FastPath = Callable[..., float]
"""``fast(nbytes, itemsize=4) -> makespan_s`` of one collective on the cluster it was made for."""


def ring_send_links(cluster: Cluster) -> tuple[np.ndarray, np.ndarray] | None:
    """α (s) and B (bytes/s) of each rank's ring message ``r → r + 1``, or ``None`` where the
    ring's times are not known in advance: host effects, or a contended channel that two
    senders' ring messages cross."""
    p = cluster.world_size
    if not cluster.textbook_tier:
        return None
    latency, bandwidth, senders = send_links(cluster, [(r, (r + 1) % p) for r in range(p)])
    if -1 in senders.values():
        return None
    return latency, bandwidth


def doubling_send_links(cluster: Cluster) -> list[tuple[float, float]] | None:
    """α (s) and B (bytes/s) of step ``k`` of recursive doubling (every rank alike), or
    ``None`` where the ranks do not move in lockstep: ``p`` not a power of two (the fold),
    host effects, unequal reduction rates, or a step whose messages share a contended channel
    or take different times."""
    p = cluster.world_size
    if p & (p - 1) or not cluster.textbook_tier or len(
            {d.reduce_Bps for d in cluster.devices}) > 1:
        return None
    steps = []
    for k in range(p.bit_length() - 1):
        latency, bandwidth, senders = send_links(cluster, [(r, r ^ (1 << k)) for r in range(p)])
        if -1 in senders.values() or np.ptp(latency) or np.ptp(bandwidth):
            return None
        steps.append((float(latency[0]), float(bandwidth[0])))
    return steps


# ---- the ring ----------------------------------------------------------------------------


def ring_step(comm: SimComm, nbytes: int) -> SimGen:
    """One ring step alone: send ``nbytes`` right, receive from the left; return the arrival."""
    p = comm.world_size
    outgoing = comm.isend((comm.rank + 1) % p, nbytes)
    yield from comm.recv((comm.rank - 1) % p, nbytes)
    arrived = comm.now
    yield outgoing.wait()
    return arrived


def ring_all_reduce_fast(cluster: Cluster, nbytes: int, itemsize: int = 4) -> float:
    """Makespan of :func:`~simulator.collectives.all_reduce.ring_all_reduce` on ``cluster``, s:
    :func:`ring_phases_fast` with both phases (the reduce-scatter, then the all-gather)."""
    return ring_phases_fast(cluster, nbytes, itemsize)


def ring_phases_fast(cluster: Cluster, nbytes: int, itemsize: int = 4,
                     reduce_scatter: bool = True, all_gather: bool = True,
                     links: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """Makespan of the ring's phases on ``cluster``, s, without a process per rank.

    With both phases it is :func:`~simulator.collectives.all_reduce.ring_all_reduce`; with
    one, the ring reduce-scatter or the ring all-gather of ``nbytes`` in all (the pieces ZeRO's
    stages are made of). Rank ``r`` runs ``K`` steps (``p − 1`` per phase); in step ``s`` it
    sends chunk ``c_s(r)`` right — its send takes ``T_r(b)`` for ``b`` bytes — and, in the
    reduce-scatter, reduces what came from the left (``g_r(b)``)::

        clock[r] ← max(clock[r] + T_r(b_s(r)), clock[r−1] + T_{r−1}(b_s(r−1))) + g_r(b_s(r−1))

    The makespan is the longest path through that grid, starting at 0: a path picks, each
    step, to stay on its rank or to come from the left neighbour. Two closed forms follow,
    with ``R`` the reduce-scatter steps (``p − 1`` or 0):

    * equal chunks and one ``g`` on all ranks: ``K·max_r T_r(b) + R·g(b)`` — the path that
      stays on the slowest rank gains the largest term every step, and no path can gain more
      in a step (so, by induction on the steps, none is longer);
    * one ``T`` on all ranks (and one ``g``), chunks of ``b`` or ``b + itemsize``: ``K·T(b_max)
      + R·g(b_max)`` — the path that moves right each step follows one chunk round the ring
      (the reduce-scatter leaves chunk ``c`` on rank ``c``, where the all-gather sends it
      first), so it gains the largest terms each step when it follows a largest chunk.

    Otherwise the grid is replayed on per-rank clocks: ``O(p)`` numpy work a step, ``O(p²)``
    in all.

    ``T_r(b) = α_r + b/B_r`` where :func:`ring_send_links` knows it (``links``, else worked out
    here): then this equals the per-rank simulation. Elsewhere one ring step of each chunk
    size is simulated with all ``p`` ranks sending at once, and each rank's send time read
    off — exact while transfers of different steps do not meet; where ring transfers share a
    channel (a fat tree's spines, a shared bus) it assumes each step's transfers run together,
    as they do when all ranks keep in step (equal chunks on symmetric links), an estimate.
    """
    p = cluster.world_size
    if p == 1 or not (reduce_scatter or all_gather):
        return 0.0
    sizes = np.array(chunk_nbytes(nbytes, p, itemsize), dtype=np.int64)
    distinct = np.unique(sizes)
    links = links if links is not None else ring_send_links(cluster)
    if links is not None:
        latency, bandwidth = links
        send_s = latency[None, :] + distinct[:, None] / bandwidth[None, :]
    else:
        send_s = np.array([np.roll(run_spmd(cluster, ring_step, int(b), trace=False).returns,
                                   -1) for b in distinct])  # [size index, rank] -> seconds
    reduce_s = np.array([[cluster.reduce_s(r, int(b)) for r in range(p)] for b in distinct])
    steps = (p - 1) * (int(reduce_scatter) + int(all_gather))
    reductions = p - 1 if reduce_scatter else 0
    if not np.ptp(reduce_s, axis=1).any():  # one reduction time per size on every rank
        if len(distinct) == 1:
            return float(steps * send_s[0].max() + reductions * reduce_s[0, 0])
        if not np.ptp(send_s, axis=1).any() and np.all(np.diff(send_s[:, 0]) >= 0) and (
                reduce_s[-1, 0] >= reduce_s[0, 0]):  # and more bytes never take less time
            return float(steps * send_s[-1, 0] + reductions * reduce_s[-1, 0])
    return _ring_replay(sizes, distinct, send_s, reduce_s, reduce_scatter, all_gather)


def _ring_replay(sizes: np.ndarray, distinct: np.ndarray, send_s: np.ndarray,
                 reduce_s: np.ndarray, reduce_scatter: bool, all_gather: bool) -> float:
    """The per-rank clocks of :func:`ring_phases_fast`, step by step, s. Rank ``r`` sends
    chunk ``(r − s − 1) mod p`` in reduce-scatter step ``s`` and ``(r − s) mod p`` in
    all-gather step ``s``: a window of a doubled row of "is it a larger chunk", so no step
    copies or gathers an array (chunks come in at most two sizes)."""
    p = len(sizes)
    larger = np.tile(sizes == distinct[-1], 2) if len(distinct) > 1 else None
    more_s, more_reduce_s = send_s[-1] - send_s[0], reduce_s[-1] - reduce_s[0]
    clock, sent = np.zeros(p), np.empty(p)
    done = np.empty(p)
    starts = ([(-s - 1) % p for s in range(p - 1)] if reduce_scatter else []) + (
        [(-s) % p for s in range(p - 1)] if all_gather else [])
    for step, start in enumerate(starts):
        np.add(clock, send_s[0], out=done)
        if larger is not None:  # the ranks that send a larger chunk this step
            np.add(done, more_s, out=done, where=larger[start:start + p])
        np.maximum(done[1:], done[:-1], out=sent[1:])  # rank r hears from r − 1
        sent[0] = max(done[0], done[-1])
        if reduce_scatter and step < p - 1:  # reduce what came: r − 1's chunk
            sent += reduce_s[0]
            if larger is not None:
                previous = (start - 1) % p
                np.add(sent, more_reduce_s, out=sent, where=larger[previous:previous + p])
        clock, sent = sent, clock
    return float(clock.max())


# ---- recursive doubling ------------------------------------------------------------------


def recursive_doubling_fast(cluster: Cluster, nbytes: int, itemsize: int = 4,
                            steps: list[tuple[float, float]] | None = None) -> float:
    """Makespan of :func:`~simulator.collectives.all_reduce.recursive_doubling_all_reduce`,
    s, where :func:`doubling_send_links` finds the ranks in lockstep (``steps``, else worked
    out here)::

        Σ_k (α_k + n/B_k + g(n))        over the lg p steps k

    Every rank swaps ``n`` bytes with ``r XOR 2^k`` and reduces them; all start step ``k``
    together, no message meets another on a contended channel, so each takes ``α_k + n/B_k``
    and the step ends everywhere at once (``Raises ValueError`` where that does not hold).
    """
    steps = steps if steps is not None else doubling_send_links(cluster)
    if steps is None:
        raise ValueError(f"recursive doubling on {cluster.name} has no exact fast path")
    n = buffer_nbytes(nbytes, itemsize)
    reduce_s = cluster.reduce_s(0, n)
    clock = 0.0
    for latency, bandwidth in steps:
        clock += latency + n / bandwidth
        clock += reduce_s
    return clock


# ---- the choice --------------------------------------------------------------------------


def _ring(cluster: Cluster, reduce_scatter: bool = True, all_gather: bool = True
          ) -> FastPath | None:
    links = ring_send_links(cluster)
    return None if links is None else functools.partial(
        ring_phases_fast, cluster, reduce_scatter=reduce_scatter, all_gather=all_gather,
        links=links)


def _doubling(cluster: Cluster) -> FastPath | None:
    steps = doubling_send_links(cluster)
    if steps is not None:
        return functools.partial(recursive_doubling_fast, cluster, steps=steps)
    folded = fold_links(cluster)
    return None if folded is None else functools.partial(folded_doubling_fast, cluster,
                                                         links=folded)


def _binomial(cluster: Cluster, reduce: bool = False) -> FastPath | None:
    links = binomial_links(cluster, reduce)
    fast = binomial_reduce_fast if reduce else binomial_broadcast_fast
    return None if links is None else functools.partial(fast, cluster, links=links)


def _trees(links: Callable[[Cluster], TreeLinks | None], fast: Callable[..., float]
           ) -> Callable[[Cluster], FastPath | None]:
    def check(cluster: Cluster) -> FastPath | None:
        found = links(cluster)
        return None if found is None else functools.partial(fast, cluster, links=found)
    return check


FAST_PATHS: dict[str, Callable[[Cluster], FastPath | None]] = {
    "all_reduce.ring": _ring,
    "all_reduce.recursive_doubling": _doubling,
    "all_reduce.binary_tree": _trees(binary_tree_links, binary_tree_fast),
    "all_reduce.double_binary_tree": _trees(double_binary_tree_links, double_binary_tree_fast),
    "broadcast.binomial": _binomial,
    "reduce.binomial": functools.partial(_binomial, reduce=True),
    "reduce_scatter.ring": functools.partial(_ring, all_gather=False),
    "all_gather.ring": functools.partial(_ring, reduce_scatter=False),
}
"""The algorithms (``operation.algorithm``) with an exact fast path, and each one's check."""

_PROGRAMS = {"ring_all_reduce": "all_reduce.ring",
             "recursive_doubling_all_reduce": "all_reduce.recursive_doubling",
             "binary_tree_all_reduce": "all_reduce.binary_tree",
             "double_binary_tree_all_reduce": "all_reduce.double_binary_tree",
             "binomial_broadcast": "broadcast.binomial",
             "binomial_reduce": "reduce.binomial",
             "ring_reduce_scatter": "reduce_scatter.ring",
             "ring_all_gather": "all_gather.ring"}


def fast_path(algorithm: str | Callable[..., Any], cluster: Cluster) -> FastPath | None:
    """The exact fast path of ``algorithm`` (a name of :data:`FAST_PATHS`, or its rank
    program) on ``cluster`` — ``fast(nbytes, itemsize=4) -> makespan_s``, equal to
    ``run_spmd(cluster, program, nbytes, itemsize=itemsize).makespan_s`` — or ``None`` where
    there is none (the events must run)."""
    name = algorithm if isinstance(algorithm, str) else _PROGRAMS.get(
        getattr(algorithm, "__name__", ""), "")
    check = FAST_PATHS.get(name)
    if check is None:
        return None
    if cluster.world_size == 1:
        return lambda nbytes, itemsize=4: 0.0
    return check(cluster)
