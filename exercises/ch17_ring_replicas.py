"""Chapter 17 exercise: a ring all-reduce between the replicas of one process.

A ``MirroredStrategy`` keeps one model copy per device and, every step, needs the SUM of the
replicas' gradients on every device. Its cross-device op (textbook chapter 17, "Cross-device
ops") does that with buffers that all live in one process — TensorFlow's ``NcclAllReduce``
runs NCCL's ring between the GPUs. The lab's twin is
``backends.tf_distribute.cross_device_ops.RingAllReduce``: the ``k`` flat buffers are cut into
``k`` chunks, then

* **reduce-scatter**, ``k − 1`` steps: in step ``s`` replica ``r`` sends chunk ``(r − s − 1)
  mod k`` to replica ``r + 1``, which adds it into its own; afterwards replica ``r`` holds
  chunk ``r`` summed over all replicas;
* **all-gather**, ``k − 1`` steps: in step ``s`` replica ``r`` sends chunk ``(r − s) mod k``
  to ``r + 1``, which overwrites its own with it.

Every replica sends ``2(k − 1)/k`` of a buffer and no replica more than another — the ring of
chapter 2, between devices instead of processes. A transfer between devices is a copy
(:func:`transfer`, given below); on GPUs the ``k`` transfers of a step run at once.

Grade your answer::

    make grade EX=17.1

and read ``solutions/ch17_ring_replicas.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from simulator.collectives.chunks import chunk_bounds  # noqa: F401 (for the chunks)


def transfer(src: Tensor, lo: int, hi: int, device: torch.device) -> Tensor:
    """Elements ``[lo, hi)`` of replica buffer ``src``, copied to ``device``: the one way a
    chunk may travel from one replica to another (the grader counts what crosses here)."""
    return src[lo:hi].to(device, copy=True)


def ring_all_reduce(buffers: Sequence[Tensor]) -> None:
    """Leave the SUM of the ``k`` equally long flat ``buffers`` (one per replica, each on its
    own device) in every one of them, in place, around the ring ``0 → 1 → … → k−1 → 0``."""
    # ===== EXERCISE 17.1: an in-process ring all-reduce over replica buffers ===============
    #
    # Points: 8 (in proportion to the tests of ex17_1 that pass; `make grade EX=17.1`)
    #
    # Implement the two phases above, step by step. Every chunk that moves from replica r
    # to replica r + 1 must go through transfer(buffers[r], lo, hi, buffers[r + 1].device)
    # and nowhere else: no replica may read another's buffer directly, and replica r sends
    # only to (r + 1) mod k.
    #
    # Hints:
    #   1. chunk_bounds(n, k) gives the (lo, hi) element range of each of the k chunks
    #      (as even as can be; some are empty when n < k: they still take part).
    #   2. In place: buffers[d][lo:hi].add_(...) in the reduce-scatter, .copy_(...) in the
    #      all-gather — a slice of a tensor is a view of its memory.
    #   3. Within one step no replica receives the chunk it is sending, so the k transfers
    #      of the step may be made one after another in any order.
    #   4. k = 1: nothing to do. Check yourself with k = 3 on paper: after the reduce-scatter
    #      replica 0 holds chunk 0 complete.
    #
    # What is graded (tests/exercises/test_ch17_ring_replicas.py, `make grade EX=17.1`):
    #   - on random k (1–6) and lengths (0–200, ones k does not divide) every buffer holds
    #     the exact sum (integer values) and equals what RingAllReduce leaves;
    #   - the traffic: every chunk crosses through transfer(); each replica sends the
    #     chunks of the ring's schedule above, 2(k − 1) of them (2(k − 1)/k of the buffer
    #     when k divides it), and the copies are those of the simulated twin's ring
    #     (simulator.tf_distribute.mirrored.ring_all_reduce);
    #   - used as a MirroredStrategy's cross-device op, three training steps on 3 CPU
    #     replicas give the same weights as with RingAllReduce.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 17.1: implement ring_all_reduce in "
                              "exercises/ch17_ring_replicas.py")
