"""Chapter 6 exercise: the gradient-ready hook and the in-order bucket launch.

The heart of DDP's Reducer (textbook chapter 6; Li et al., VLDB 2020, §3.2.3–3.2.4): autograd
calls a hook on every parameter once its gradient is accumulated. The hook

1. copies the gradient, divided by the world size, into the parameter's view of its
   bucket's flat buffer (so the all-reduce's SUM becomes an average);
2. marks it ready: one gradient fewer pending in that bucket;
3. launches every bucket that is now complete — **in bucket order**: bucket ``b`` may start
   only once buckets ``0 … b−1`` have started, because every rank must issue the
   collectives in the same order (a rank whose gradients arrive in another order would
   otherwise pair its bucket 1 with another rank's bucket 0).

:class:`HookReducer` is the Reducer cut down to this: its buckets, buffers and views are made
for you; you write :meth:`HookReducer.mark_ready`. The real one is ``backends.ddp.Reducer``.

Grade your answer::

    make grade CH=06

and read ``solutions/ch06_reducer_hook.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


class HookReducer:
    """Buckets of flat buffers and the launch of their all-reduces as gradients arrive.

    Args:
        buckets: parameter indices per bucket (bucket 0 launches first), e.g. from
            ``simulator.ddp.assign_buckets``.
        shapes: the shape of every parameter, by index.
        world_size: ranks that average their gradients.
        all_reduce_async: starts an all-reduce (SUM) of a flat buffer and returns its work
            (``lambda buf: dist.all_reduce(buf, async_op=True)`` in a real process group).

    Attributes:
        buffers: one flat float32 buffer per bucket.
        views: ``views[i]`` is parameter ``i``'s slice of its bucket's buffer, shaped like it.
        bucket_of: ``bucket_of[i]`` is the bucket holding parameter ``i``.
        pending: gradients each bucket still waits for.
        next_bucket: the next bucket to launch.
        launched: buckets launched so far, in launch order.
        works: their works, in the same order.
    """

    def __init__(self, buckets: Sequence[Sequence[int]], shapes: Sequence[torch.Size],
                 world_size: int, all_reduce_async: Callable[[torch.Tensor], Any]) -> None:
        self.world_size = world_size
        self.all_reduce_async = all_reduce_async
        self.buffers: list[torch.Tensor] = []
        self.views: dict[int, torch.Tensor] = {}
        self.bucket_of: dict[int, int] = {}
        for b, members in enumerate(buckets):
            numels = [torch.Size(shapes[i]).numel() for i in members]
            buffer = torch.zeros(sum(numels))
            self.buffers.append(buffer)
            for i, piece in zip(members, buffer.split(numels), strict=True):
                self.views[i] = piece.view(shapes[i])
                self.bucket_of[i] = b
        self.pending = [len(members) for members in buckets]
        self.next_bucket = 0
        self.launched: list[int] = []
        self.works: list[Any] = []

    def mark_ready(self, i: int, grad: torch.Tensor) -> None:
        """Parameter ``i``'s gradient ``grad`` is final: bucket it, launch what is complete."""
        # ===== EXERCISE 6.1: the gradient-ready hook ========================================
        #
        # Points: 10 (in proportion to the tests of ex06_1 that pass; `make grade EX=6.1`)
        #
        # 1. Write grad / world_size into self.views[i] (in place: copy_ or torch.mul(...,
        #    out=...); the view shares memory with the bucket's buffer).
        # 2. One gradient fewer pending in bucket self.bucket_of[i].
        # 3. While self.next_bucket is a bucket with nothing pending: call
        #    self.all_reduce_async on its buffer, append the work to self.works and the bucket
        #    to self.launched, and move self.next_bucket on. Never launch a later bucket
        #    before an earlier one, and never launch a bucket twice.
        #
        # What is graded (tests/exercises/test_ch06_reducer_hook.py, `make grade CH=06`):
        #   - buffers hold exactly grad / world_size when launched; each bucket launches once,
        #     in order, at the first moment it and all before it are complete;
        #   - wired to autograd's post-accumulate-grad hooks of a real model, one backward
        #     launches every bucket, and the launches follow the simulator's bucket readiness
        #     (simulator.ddp.predict_step's "ready" spans) for the same model;
        #   - real: on 2 processes with dist.all_reduce, the averaged gradients equal those of
        #     torch.nn.parallel.DistributedDataParallel.
        # ===================================================================================
        raise NotImplementedError("EXERCISE 6.1: implement HookReducer.mark_ready in "
                                  "exercises/ch06_reducer_hook.py")
