"""The two things every simulated collective does: cut a buffer, and swap with a peer.

A simulated rank program moves sizes, not data. Where the real twin cuts a tensor with
:func:`~simulator.collectives.chunks.chunk_bounds` and slices it, the simulated twin asks
:func:`chunk_nbytes` for the same cut in bytes; where the real twin calls
``comm.sendrecv(dst, send, src, recv)`` (:mod:`backends.collectives.comm`),
the simulated twin calls :func:`sendrecv` with the two sizes. Where the real twin posts the
next step's receive before waiting on the current one (the rings, recursive doubling), the
simulated twin does too (:func:`posted_ahead_steps`): with eager sends it makes no difference,
with gloo's receiver-driven sends
(:attr:`~simulator.core.host_hooks.ClusterEffects.receiver_driven_sends`) the sender finds the
receive ready instead of waiting for its notice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simulator.collectives.chunks import chunk_sizes
from simulator.core.comm import SimComm, SimGen


def buffer_nbytes(nbytes: int, itemsize: int) -> int:
    """Bytes of the whole elements in an ``nbytes`` buffer of ``itemsize``-byte elements."""
    if itemsize < 1:
        raise ValueError(f"itemsize must be at least 1 byte, got {itemsize}")
    if nbytes < 0:
        raise ValueError(f"a buffer cannot have {nbytes} bytes")
    return nbytes // itemsize * itemsize


def chunk_nbytes(nbytes: int, parts: int, itemsize: int) -> list[int]:
    """Bytes of each of ``parts`` chunks, cut by elements as the real twin cuts its tensor."""
    count = buffer_nbytes(nbytes, itemsize) // itemsize
    return [size * itemsize for size in chunk_sizes(count, parts)]


def sendrecv(comm: SimComm, dst: int, send_nbytes: int, src: int, recv_nbytes: int,
             tag: int = 0) -> SimGen:
    """Send ``send_nbytes`` to ``dst`` while receiving ``recv_nbytes`` from ``src`` (one step).

    Like ``MPI_Sendrecv``: post the receive, start the send, wait for both. The step ends when
    the later of the two ends: ``α + n·β`` when both directions move ``n`` bytes unhindered.
    """
    incoming = comm.irecv(src, recv_nbytes, tag)
    outgoing = comm.isend(dst, send_nbytes, tag)
    yield incoming.wait()
    yield outgoing.wait()


def posted_ahead_steps(comm: SimComm, peers: Sequence[tuple[int, int]],
                       sizes: Sequence[tuple[int, int]],
                       after: Callable[[int], SimGen] | None = None) -> SimGen:
    """Steps of swaps, each receive posted one step ahead, as the real rings do.

    Step ``s`` sends ``sizes[s][0]`` bytes to ``peers[s][0]`` and receives ``sizes[s][1]``
    from ``peers[s][1]``: the receive of step ``s + 1`` is posted right after step ``s``'s
    send starts, before step ``s`` is waited for; ``after(s)`` (e.g. the reduction of what
    arrived) runs once both of step ``s``'s messages are done. The real rings wait for their
    sends only at the end; here each step waits for its own, which in a ring (every rank
    sending about as much as it receives, at once) ends about when the receive does, and
    keeps the per-rank simulation equal to
    :func:`~simulator.collectives.all_reduce.ring_all_reduce_fast`.
    """
    ahead = comm.irecv(peers[0][1], sizes[0][1]) if peers else None
    for step, (dst, _) in enumerate(peers):
        current = ahead
        assert current is not None
        outgoing = comm.isend(dst, sizes[step][0])
        ahead = (comm.irecv(peers[step + 1][1], sizes[step + 1][1])
                 if step + 1 < len(peers) else None)
        yield current.wait()
        yield outgoing.wait()
        if after is not None:
            yield from after(step)
