"""Point-to-point messaging on real processes: ping-pong and the naive one-to-all.

Twin of :mod:`simulator.collectives.point_to_point` (same names, same steps). ``dist.send``
and ``dist.recv`` block until the message has been handed over, so each call is one α + nβ.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from backends.trace import Tracer, span


def ping_pong(buf: torch.Tensor, tracer: Tracer | None = None) -> None:
    """Rank 0 sends ``buf`` to rank 1 and receives it back into ``buf``; others idle."""
    rank, n = dist.get_rank(), buf.nbytes
    if rank == 0:
        with span(tracer, "send", "send 0->1", n):
            dist.send(buf, 1)
        with span(tracer, "recv", "recv 1->0", n):
            dist.recv(buf, 1)
    elif rank == 1:
        with span(tracer, "recv", "recv 0->1", n):
            dist.recv(buf, 0)
        with span(tracer, "send", "send 1->0", n):
            dist.send(buf, 0)


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
    from backends.measure import measure

    buf = torch.zeros(max(nbytes, 0), dtype=torch.uint8)
    return measure(lambda: ping_pong(buf), repeats=5).median_s
