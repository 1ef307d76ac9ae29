"""The chain of dependent exchanges, simulated, and the latencies that make it match the real one.

On a host with fewer cores than runnable threads (four ranks, each a main thread and gloo's I/O
thread, on two cores) a rank woken by a message may wait for a core before it can send the
next one (and, under the kernel's default scheduling policy, for a whole tick when gloo's
threads livelock — what the lab's ranks avoid by running under ``SCHED_BATCH``). The loopback
model prices that wait as the latency of a message that starts while others are in flight,
one value per number in flight (:func:`~simulator.core.hardware.chain_latencies`), measured
by the calibration's *chain of dependent exchanges*: ``k`` ranks pass a small message round a
ring, each step waiting for the last, timed as the mean step of a
long chain (:mod:`lab.calibrate`). The collectives' model reads the chain posted the way the
collectives post their steps — each rank's next receive posted before it waits for the current
one (:func:`backends.primitives.chain_ahead`, simulated by :func:`chain_ahead`).

A simulated step costs its latency *plus* a little more (the message's bytes, the posting
overhead), so the table is scaled until the simulated chain takes exactly the measured time per
step (:func:`chain_means`): the model reproduces the primitive it is calibrated from, the
property ``benchmarks/chain_self_consistency.py`` checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from simulator.core.calibration import CHAIN_BYTES, CHAIN_STEPS

if TYPE_CHECKING:
    from simulator.core.comm import SimComm, SimGen
    from simulator.core.hardware import Cluster

ROUNDS = 3
"""Rescaling rounds of :func:`chain_means` (one simulated chain per round and ``k``)."""


def chain_ahead(comm: SimComm, k: int, nbytes: int = CHAIN_BYTES,
                steps: int = CHAIN_STEPS, reduced: bool = False) -> SimGen:
    """The calibration's chain among ranks ``0 … k−1`` posted a step ahead (the simulated
    :func:`backends.primitives.chain_ahead`): send right, post the next receive from the left, then
    wait for the current receive (``reduced``: and reduce what it brought) and the send."""
    if comm.rank < k:
        yield from posted_ahead(comm, (comm.rank - 1) % k, (comm.rank + 1) % k, nbytes, steps,
                                reduced)


def posted_ahead(comm: SimComm, left: int, right: int, nbytes: int, steps: int,
                 reduced: bool = False) -> SimGen:
    """``steps`` steps of receiving ``nbytes`` from ``left`` and sending them to ``right``,
    each receive after the first posted a step ahead: post the first receive; then, each
    step, send, post the next receive, wait for the current receive (``reduced``: and reduce
    what it brought) and the send."""
    if steps < 1:
        return
    ahead = comm.irecv(left, nbytes)
    for step in range(steps):
        current = ahead
        sent = comm.isend(right, nbytes)
        if step + 1 < steps:
            ahead = comm.irecv(left, nbytes)
        yield current.wait()
        if reduced:
            yield from comm.reduce(nbytes)
        yield sent.wait()


def chain_plain(comm: SimComm, k: int, nbytes: int = CHAIN_BYTES,
                steps: int = CHAIN_STEPS) -> SimGen:
    """The calibration's plain chain among ranks ``0 … k−1`` (the simulated
    :func:`backends.primitives.chain_step`, ``steps`` times): post the receive from the left, send
    right, wait for both."""
    if comm.rank >= k:
        return
    left, right = (comm.rank - 1) % k, (comm.rank + 1) % k
    for _ in range(steps):
        works = (comm.irecv(left, nbytes), comm.isend(right, nbytes))
        for work in works:
            yield work.wait()


def chain_step_s(cluster: Cluster, k: int, ahead: bool = True,
                 steps: int = CHAIN_STEPS) -> float:
    """Simulated time of one step of a chain of ``steps`` steps among ``k`` ranks run back to
    back (``ahead``: posted a step ahead; else plainly), s."""
    from simulator.core.comm import run_spmd

    program = chain_ahead if ahead else chain_plain
    return run_spmd(cluster, program, k, CHAIN_BYTES, steps, trace=False).makespan_s / steps


def chain_means(build: Callable[[Sequence[float]], Cluster], measured: Sequence[float],
                ahead: bool = True) -> tuple[float, ...]:
    """The latency table — entry ``j`` for ``j + 1`` others in flight — with which the cluster
    ``build(table)`` simulates the chain among ``j + 2`` ranks (posted a step ahead, or
    plainly) in the ``measured[j]`` time per step, s: :data:`ROUNDS` rounds of scaling each
    entry by measured / simulated. Entries for chains longer than the cluster's ranks stay as
    measured."""
    table = list(measured)
    for _ in range(ROUNDS):
        cluster = build(table)
        for j, target in enumerate(measured):
            k = j + 2
            if k > cluster.world_size or target <= 0:
                continue
            simulated = chain_step_s(cluster, k, ahead)
            if simulated > 0:
                table[j] *= target / simulated
    return tuple(table)
