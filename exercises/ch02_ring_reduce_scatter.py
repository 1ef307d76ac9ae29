"""Chapter 2 exercise: the reduce-scatter phase of the ring all-reduce.

The ring all-reduce (Patarasuk & Yuan 2009; textbook chapter 2, "Ring All-Reduce") cuts the
buffer into ``p`` chunks and runs two phases of ``p − 1`` steps on the ring ``r → r + 1``. In the
first, the **reduce-scatter phase**, partial sums travel around the ring collecting one
contribution per hop, until rank ``r`` holds chunk ``r`` reduced over all ranks. Chunk each rank
sends in step ``s`` (the textbook's section "The reduce-scatter phase" follows it cell by cell)::

    step   rank 0   rank 1   rank 2   rank 3
      0      3        0        1        2        (a received chunk is combined into one's own)
      1      2        3        0        1
      2      1        2        3        0        → rank r holds chunk r, complete

Each step moves and reduces one chunk, ``(p−1)·α + n·(p−1)/p·(β + γ)`` in all (eq. eq-rs-ring).
The all-gather phase then passes the finished chunks around once more.

Grade your answer::

    make grade CH=02

and read ``solutions/ch02_ring_reduce_scatter.py`` afterwards.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

SUM = dist.ReduceOp.SUM


def ring_reduce_scatter_phase(tensor: torch.Tensor, op: dist.ReduceOp.RedOpType = SUM,
                              group: dist.ProcessGroup | None = None) -> None:
    """Leave chunk ``r`` of ``tensor`` on rank ``r`` reduced over every rank, in place.

    Chunks are those of ``simulator.collectives.chunks.chunk_bounds(tensor.numel(), p)``. The
    other chunks of ``tensor`` are scratch afterwards (they hold partial sums).

    Args:
        tensor: this rank's flat, contiguous buffer.
        op: ``dist.ReduceOp.SUM``, ``MAX`` or ``MIN``.
        group: the process group (``None``: every rank).
    """
    # ===== EXERCISE 2.2: the reduce-scatter phase of the ring all-reduce ====================
    #
    # Points: 10 (in proportion to the tests of ex02_2 that pass; `make grade EX=2.2`)
    #
    # Rank r talks to two neighbours only: it sends to right = (r + 1) % p and receives from
    # left = (r − 1) % p (ranks in the group: dist.get_rank(group), dist.get_world_size(group),
    # and the keyword arguments group_dst= / group_src= of the point-to-point calls).
    #
    # 1. Cut the buffer: bounds = chunk_bounds(tensor.numel(), p) from
    #    simulator.collectives.chunks gives the (start, stop) element offsets of each chunk,
    #    the first count % p chunks one element longer — the cut both lab twins use.
    # 2. In step s = 0 … p−2 (textbook section "Structure", the index table):
    #      send    chunk (r − s − 1) % p  to the right,
    #      receive chunk (r − s − 2) % p  from the left into a temporary buffer,
    #      combine the received chunk into your own copy of that chunk (SUM adds; MAX and MIN
    #      take torch.maximum / torch.minimum).
    #    The chunk you send in step s + 1 is the one you combined in step s: partial sums
    #    travel, and after the last step chunk r is complete on rank r — the convention of the
    #    lab's ring (backends/collectives/reduce_scatter.py) and of dist.reduce_scatter_tensor.
    #    It is what lets the lab's ring all-gather (ring_all_gather_chunks(…, mine=rank) in
    #    backends/collectives/all_gather.py) finish the all-reduce from where you stop.
    # 3. Every rank sends and receives in each step: post the receive first (dist.irecv), then
    #    the send (dist.isend), then wait() for both (gloo's large sends are rendezvous; two
    #    blocking sends facing each other deadlock).
    # 4. Chunks may be empty (fewer elements than ranks) or differ by one element; a tensor
    #    slice tensor[lo:hi] is a view, so you can send it and combine into it directly.
    #
    # What is graded (tests/exercises/test_ch02_ring_reduce_scatter.py, `make grade CH=02`),
    # on 1, 2 and 4 real processes:
    #   - chunk r on rank r equals chunk r of dist.all_reduce's result, for float32, float64 and
    #     int64 buffers, SUM, MAX and MIN, and element counts that p does not divide;
    #   - sim vs real: each rank sends the messages the simulated twin's ring reduce-scatter
    #     sends (p − 1 messages, one chunk each), counted on the real process group;
    #   - no built-in collective (dist.all_reduce, dist.reduce_scatter_tensor, …) is called.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 2.2: implement ring_reduce_scatter_phase in "
                              "exercises/ch02_ring_reduce_scatter.py")
