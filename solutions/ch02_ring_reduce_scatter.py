"""Chapter 2, reference answer: the reduce-scatter phase of the ring all-reduce.

The exercise is in ``exercises/ch02_ring_reduce_scatter.py``. The lab's twins are
``ring_reduce_scatter_chunks`` in ``backends/collectives/reduce_scatter.py`` and in
``simulator/collectives/reduce_scatter.py``: the same indices, the same steps.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from simulator.collectives.chunks import chunk_bounds
from solutions.ch02_recursive_doubling import Group, check_op, combine, sendrecv

SUM = dist.ReduceOp.SUM


def ring_reduce_scatter_phase(tensor: torch.Tensor, op: dist.ReduceOp.RedOpType = SUM,
                              group: Group = None) -> None:
    """Leave chunk ``r`` of ``tensor`` on rank ``r`` reduced over every rank, in place.

    ``p − 1`` steps on the ring ``r → r + 1``, one chunk each way per step:
    ``(p−1)·α + n·(p−1)/p·(β + γ)`` (textbook eq. eq-rs-ring).
    """
    check_op(op)
    p, r = dist.get_world_size(group), dist.get_rank(group)
    bounds = chunk_bounds(tensor.numel(), p)  # the first count % p chunks one element longer
    right, left = (r + 1) % p, (r - 1) % p
    incoming = tensor.new_empty(max(hi - lo for lo, hi in bounds))  # the largest chunk

    for step in range(p - 1):
        # Step s sends the chunk this rank combined in step s − 1 (in step 0: its own input of
        # chunk r − 1) and receives the left neighbour's partial sum of chunk r − s − 2. After
        # step p − 2 that received chunk is r − p = r itself, now with all p contributions.
        send_lo, send_hi = bounds[(r - step - 1) % p]
        recv_lo, recv_hi = bounds[(r - step - 2) % p]
        got = incoming[:recv_hi - recv_lo]
        sendrecv(tensor[send_lo:send_hi], right, got, left, group)
        combine(tensor[recv_lo:recv_hi], got, op)  # a slice is a view: this writes into tensor
