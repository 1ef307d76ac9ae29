"""Chapter 2, reference answer: recursive-doubling all-reduce on point-to-point messages.

The exercise is in ``exercises/ch02_recursive_doubling.py``. The lab's twins of the same
algorithm, step for step, are ``recursive_doubling_all_reduce`` in
``backends/collectives/all_reduce.py`` (written on the lab's ``Comm``) and in
``simulator/collectives/all_reduce.py``; this answer uses bare ``torch.distributed`` calls so
that every message is in sight. Its helpers serve exercise 2.2 too.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from simulator.collectives.schedule import Fold

SUM = dist.ReduceOp.SUM
Group = dist.ProcessGroup | None


def check_op(op: dist.ReduceOp.RedOpType) -> None:
    """Refuse what :func:`combine` cannot do — on every rank alike, before any message."""
    if op not in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN):
        raise ValueError(f"unsupported reduction {op}; use SUM, MAX or MIN")


def combine(acc: torch.Tensor, incoming: torch.Tensor, op: dist.ReduceOp.RedOpType) -> None:
    """``acc ⊕= incoming`` in place, for ⊕ = SUM, MAX or MIN (:func:`check_op` refuses others)."""
    if op == dist.ReduceOp.SUM:
        acc.add_(incoming)
    elif op == dist.ReduceOp.MAX:
        torch.maximum(acc, incoming, out=acc)
    else:
        torch.minimum(acc, incoming, out=acc)


def sendrecv(send: torch.Tensor, dst: int, recv: torch.Tensor, src: int,
             group: Group = None) -> None:
    """Send ``send`` to ``dst`` while receiving ``recv`` from ``src`` (group ranks), like
    ``MPI_Sendrecv``.

    The receive is posted *before* the send. Gloo's large sends are rendezvous: a send waits
    until its receiver has posted the receive. Two partners that both call a blocking
    ``dist.send`` first would wait for each other forever.
    """
    requests = [dist.irecv(recv, group=group, group_src=src),
                dist.isend(send, group=group, group_dst=dst)]
    for request in requests:
        if request is not None:  # None only on a rank outside the group
            request.wait()


def recursive_doubling_all_reduce(tensor: torch.Tensor,
                                  op: dist.ReduceOp.RedOpType = SUM,
                                  group: Group = None) -> None:
    """All-reduce ``tensor`` in place by recursive doubling, like ``dist.all_reduce(tensor, op)``.

    ``lg p`` swaps of the whole buffer, ``lg p·(α + n·β + n·γ)`` (Thakur, Rabenseifner & Gropp
    2005; textbook eq. eq-ar-rd). Any ``p``: other than a power of two, MPICH's fold first.
    """
    check_op(op)
    r = dist.get_rank(group)
    fold = Fold(dist.get_world_size(group))  # p' = 2^⌊lg p⌋ survivors, extra = p − p'
    incoming = torch.empty_like(tensor)

    # Fold in: the first 2·extra ranks pair up (0,1), (2,3), …; each odd one hands its buffer
    # to its even partner and sits out until the result comes back.
    if r < 2 * fold.extra:
        if r % 2:
            dist.send(tensor, group=group, group_dst=r - 1)
            dist.recv(tensor, group=group, group_src=r - 1)  # fold out: the result
            return
        dist.recv(incoming, group=group, group_src=r + 1)
        combine(tensor, incoming, op)

    # Recursive doubling among the p' survivors, under their new ranks 0 … p'−1: after the
    # step of distance d every survivor holds the reduction over an aligned group of 2d.
    me = fold.new_rank(r)
    assert me is not None, "odd ranks of the fold returned above"
    d = 1
    while d < fold.size:
        partner = fold.old_rank(me ^ d)
        sendrecv(tensor, partner, incoming, partner, group)
        combine(tensor, incoming, op)
        d *= 2

    # Fold out: the even partner sends the result to the odd rank that sat out.
    if r < 2 * fold.extra:
        dist.send(tensor, group=group, group_dst=r + 1)
