"""Point-to-point messaging: ping-pong, a stream one way and the naive one-to-all (book
ch. 1–2 opening).

The α-β model (Hockney 1994) prices one message of ``n`` bytes at ``α + n·β``. Three patterns
make it visible:

* **ping-pong** — rank 0 sends ``n`` bytes to rank 1, which sends them back. The round trip
  costs ``2(α + nβ)``; it is how α and β are measured (``lab.calibrate``).
* **stream** — rank 0 sends ``n`` bytes to rank 1, one way, call after call (OSU's bandwidth
  test beside its latency test): ``α + nβ`` a message in the α-β model, but with gloo's
  receiver-driven sends each one waits for rank 1's next receive, and is queued.
* **one-to-all, naive** — the root sends the whole message to every other rank, one after
  another. It costs ``(p − 1)(α + nβ)``: linear in ``p``, which is why chapter 2's trees and
  rings exist.

The real twin is :mod:`backends.collectives.point_to_point`, with the same function names.
"""

from __future__ import annotations

from simulator.core.comm import SimComm, SimGen


def ping_pong(comm: SimComm, nbytes: int) -> SimGen:
    """Rank 0 sends ``nbytes`` to rank 1 and waits for them to come back; others idle."""
    if comm.rank == 0:
        yield from comm.send(1, nbytes)
        yield from comm.recv(1, nbytes)
    elif comm.rank == 1:
        yield from comm.recv(0, nbytes)
        yield from comm.send(0, nbytes)


def ping_pong_cost(nbytes: float, alpha_s: float, beta_s_per_B: float) -> float:
    """Closed form of :func:`ping_pong`: ``2(α + nβ)`` seconds (Hockney 1994)."""
    return 2 * (alpha_s + nbytes * beta_s_per_B)


def stream(comm: SimComm, nbytes: int) -> SimGen:
    """Rank 0 sends ``nbytes`` to rank 1, one way; others idle. Run back to back (``calls``)
    it is OSU's bandwidth test with a window of one: on a cluster with receiver-driven sends
    each send but the first is queued (posted before rank 1 posted its next receive)."""
    if comm.rank == 0:
        yield from comm.send(1, nbytes)
    elif comm.rank == 1:
        yield from comm.recv(0, nbytes)


def stream_cost(nbytes: float, alpha_s: float, beta_s_per_B: float) -> float:
    """Closed form of :func:`stream`: ``α + nβ`` seconds a message."""
    return alpha_s + nbytes * beta_s_per_B


def one_to_all(comm: SimComm, nbytes: int, root: int = 0) -> SimGen:
    """The root sends ``nbytes`` to each other rank in turn, waiting for each send to end."""
    if comm.rank == root:
        for dst in range(comm.world_size):
            if dst != root:
                yield from comm.send(dst, nbytes)
    else:
        yield from comm.recv(root, nbytes)


def one_to_all_cost(world_size: int, nbytes: float, alpha_s: float,
                    beta_s_per_B: float) -> float:
    """Closed form of :func:`one_to_all`: ``(p − 1)(α + nβ)`` seconds."""
    return (world_size - 1) * (alpha_s + nbytes * beta_s_per_B)
