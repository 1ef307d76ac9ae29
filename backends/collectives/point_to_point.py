"""Point-to-point messaging on real processes: ping-pong, a stream one way and the naive
one-to-all.

Twin of :mod:`simulator.collectives.point_to_point` (same names, same steps). ``dist.send``
and ``dist.recv`` block until the message has been handed over, so each call is one α + nβ.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from backends.trace import Tracer, span


def ping_pong(buf: torch.Tensor, tracer: Tracer | None = None,
              returns: list[float] | None = None) -> None:
    """Rank 0 sends ``buf`` to rank 1 and receives it back into ``buf``; others idle.

    ``returns``: rank 0 appends how long its blocking send took to *return*, s — over TCP
    it returns once the socket buffers hold what has not yet been read, before rank 1 has
    the whole message (:mod:`lab.calibrate`)."""
    rank, n = dist.get_rank(), buf.nbytes
    if rank == 0:
        with span(tracer, "send", "send 0->1", n):
            start = time.perf_counter()
            dist.send(buf, 1)
            if returns is not None:
                returns.append(time.perf_counter() - start)
        with span(tracer, "recv", "recv 1->0", n):
            dist.recv(buf, 1)
    elif rank == 1:
        with span(tracer, "recv", "recv 0->1", n):
            dist.recv(buf, 0)
        with span(tracer, "send", "send 1->0", n):
            dist.send(buf, 0)


def stream(buf: torch.Tensor, tracer: Tracer | None = None) -> None:
    """Rank 0 sends ``buf`` to rank 1, one way; others idle.

    Called back to back it is OSU's bandwidth test with a window of one (``osu_bw``), beside
    the ping-pong's latency test: each send is posted the moment the last one was handed
    over, before rank 1 has posted its next receive — a queued send, which gloo's I/O thread
    writes when the receive-ready notice comes (benchmarks/NOTES.md, "A stream one way").
    """
    rank, n = dist.get_rank(), buf.nbytes
    if rank == 0:
        with span(tracer, "send", "send 0->1", n):
            dist.send(buf, 1)
    elif rank == 1:
        with span(tracer, "recv", "recv 0->1", n):
            dist.recv(buf, 0)


def one_to_all(buf: torch.Tensor, root: int = 0, tracer: Tracer | None = None) -> None:
    """The root sends ``buf`` to every other rank in turn; the others receive into ``buf``.

    The same result as ``dist.broadcast(buf, root)``, at a cost linear in the world size.
    """
    rank, n = dist.get_rank(), buf.nbytes
    if rank == root:
        for dst in range(dist.get_world_size()):
            if dst != root:
                with span(tracer, "send", f"send {root}->{dst}", n):
                    dist.send(buf, dst)
    else:
        with span(tracer, "recv", f"recv {root}->{rank}", n):
            dist.recv(buf, root)


def ping_pong_demo(nbytes: int = 2**20) -> float:
    """One ping-pong of ``nbytes`` timed on rank 0, s (for ``torchrun -m backends.launch``)."""
    from backends.device import device
    from backends.measure import measure

    buf = torch.zeros(max(nbytes, 0), dtype=torch.uint8, device=device())
    return measure(lambda: ping_pong(buf), repeats=5).median_s
