"""Chapter 2 exercise: recursive-doubling all-reduce, written on point-to-point messages.

Recursive doubling (textbook chapter 2, "Recursive doubling", eq. eq-ar-rd) all-reduces in
``lg p`` steps: in the step of distance ``d = 1, 2, 4, …`` rank ``r`` swaps its *whole* buffer
with rank ``r XOR d`` and both combine what they received into their own. After the step of
distance ``d`` each rank holds the reduction over an aligned group of ``2d`` ranks::

    p = 4         d = 1: 0↔1  2↔3      d = 2: 0↔2  1↔3      → every rank holds a+b+c+d

It costs ``lg p·(α + n·β + n·γ)``: the fewest latencies of any all-reduce, and ``lg p`` full
buffers per rank, so it wins for short messages and loses for long ones (exercise 2.4).

Grade your answer::

    make grade CH=02

and read ``solutions/ch02_recursive_doubling.py`` afterwards. The lab's own twins of this
algorithm are ``recursive_doubling_all_reduce`` in ``simulator/collectives/all_reduce.py`` and
``backends/collectives/all_reduce.py``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

SUM = dist.ReduceOp.SUM


def recursive_doubling_all_reduce(tensor: torch.Tensor,
                                  op: dist.ReduceOp.RedOpType = SUM,
                                  group: dist.ProcessGroup | None = None) -> None:
    """All-reduce ``tensor`` in place by recursive doubling, like ``dist.all_reduce(tensor, op)``.

    Args:
        tensor: this rank's flat, contiguous buffer; on return it holds the reduction of every
            rank's buffer.
        op: ``dist.ReduceOp.SUM``, ``MAX`` or ``MIN``.
        group: the process group (``None``: every rank).
    """
    # ===== EXERCISE 2.1: recursive-doubling all-reduce on point-to-point messages ==========
    #
    # Points: 10 (in proportion to the tests of ex02_1 that pass; `make grade EX=2.1`)
    #
    # Use only torch.distributed's point-to-point calls: dist.isend / dist.irecv (and
    # dist.send / dist.recv). Peers are ranks *in the group*: dist.get_rank(group),
    # dist.get_world_size(group), and the keyword arguments group_dst= / group_src= of the
    # send and receive calls name them. (The lab's backends.collectives.comm.Comm wraps these
    # calls, and its reduce() combines two tensors under op; you may use it.)
    #
    # 1. p = 2^k ranks. For d = 1, 2, 4, … < p: partner = rank XOR d; send the whole tensor to
    #    the partner while receiving the partner's into a temporary buffer (torch.empty_like),
    #    then combine: SUM adds (tensor += incoming), MAX and MIN take torch.maximum /
    #    torch.minimum elementwise.
    # 2. Both partners send at the same moment. Gloo's large sends are *rendezvous*: a
    #    blocking dist.send waits until the receiver has posted its receive, so two blocking
    #    sends facing each other deadlock (textbook: "Deadlock in a ring"). Post the receive
    #    first (irecv), then the send (isend), then wait() for both.
    # 3. p = 1 must work too (there is nothing to do).
    #
    # Stretch: any p (textbook "Non-power-of-two process counts", eq. eq-fold). With
    # p' = the largest power of two ≤ p and extra = p − p': odd rank r < 2·extra sends its
    # buffer to r − 1, which combines it, and sits out; the p' survivors run step 1 under new
    # ranks 0 … p'−1; finally each even r < 2·extra sends the result to r + 1.
    # simulator.collectives.schedule.Fold does the rank arithmetic. If you skip the stretch,
    # raise NotImplementedError when p is not a power of two: the stretch tests then skip.
    #
    # What is graded (tests/exercises/test_ch02_recursive_doubling.py, `make grade CH=02`),
    # on 1, 2 and 4 real processes (and 3 and 5 for the stretch):
    #   - every rank ends with exactly what dist.all_reduce gives, for float32, float64 and
    #     int64 buffers, SUM, MAX and MIN, and element counts that p does not divide;
    #   - sim vs real: each rank sends exactly the messages the simulated twin sends
    #     (lg p messages of the whole buffer), counted on the real process group;
    #   - no built-in collective (dist.all_reduce, dist.broadcast, …) is called.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 2.1: implement recursive_doubling_all_reduce in "
                              "exercises/ch02_recursive_doubling.py")
