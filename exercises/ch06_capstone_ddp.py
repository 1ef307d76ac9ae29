"""Chapter 6 capstone: a bucketed DDP whose all-reduces overlap backward.

You write DistributedDataParallel whole, the way Li et al. ("PyTorch Distributed", VLDB 2020,
§3.2) and textbook chapters 5–6 tell it. :class:`BucketedDDP` wraps a model; after
``loss.backward()`` every gradient is the average over the ranks of the process group, and the
averaging has run *during* backward, bucket by bucket:

1. **Broadcast** — at construction, rank 0 of the group sends its parameters to every other
   rank, so all replicas start equal.
2. **Buckets** — the trainable parameters, in *reverse* registration order (the order
   backward produces their gradients), are grouped into buckets of at least
   ``bucket_cap_bytes`` (exercise 5.1); each bucket is one flat buffer, and every
   parameter's gradient has a view into it.
3. **Hooks** — a post-accumulate-grad hook per parameter copies its gradient into its view.
   When a bucket's last gradient is in, the bucket is ready; ready buckets start an
   asynchronous all-reduce **in bucket order** (exercise 6.1), so communication runs while
   backward computes the remaining gradients.
4. **Finish** — at the end of backward: wait for every all-reduce, divide by the world size,
   copy the averages back into the gradients.

The constructor, :class:`Bucket` and ``forward`` are given; you write the five methods under
the banner. The lab's own version, with ``no_sync`` and Join, is :mod:`backends.ddp` — read it
*after* you are done, like ``torch/nn/parallel/distributed.py`` and ``reducer.cpp``.

Grade your answer::

    make grade EX=6.4

and read ``solutions/ch06_capstone_ddp.py`` afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from simulator.ddp import assign_buckets  # noqa: F401 (the rule of exercise 5.1)


@dataclass
class Bucket:
    """One flat buffer holding several parameters' gradients, all-reduced as one message.

    Attributes:
        indices: positions of its parameters in :attr:`BucketedDDP.params`, in the order
            their views sit in the buffer.
        buffer: the flat gradient buffer (the parameters' dtype).
        views: ``views[k]`` is parameter ``indices[k]``'s slice of ``buffer``, shaped like it.
        pending: gradients still missing in this backward.
        work: the asynchronous all-reduce once launched, else ``None``.
    """

    indices: list[int]
    buffer: torch.Tensor
    views: list[torch.Tensor] = field(default_factory=list)
    pending: int = 0
    work: Any = None


class BucketedDDP(nn.Module):
    """Wraps ``module``; after ``loss.backward()`` its gradients are averaged over the group.

    Args:
        module: this rank's replica of the model.
        bucket_cap_bytes: a bucket closes once it holds at least this many bytes (the first
            bucket too, as in PyTorch when ``bucket_cap_mb`` is given).
        process_group: the ranks that train together (``None``: all of them).

    Attributes:
        params: the trainable parameters, registration order.
        buckets: bucket 0 is all-reduced first.
        bucket_of: ``bucket_of[i] = (b, k)``: parameter ``i`` is view ``k`` of bucket ``b``.
        ready: ``ready[i]``: parameter ``i``'s gradient arrived in this backward.
        next_bucket: the next bucket to launch.
        finish_queued: :meth:`finish` is queued for the end of this backward.
    """

    def __init__(self, module: nn.Module, bucket_cap_bytes: int,
                 process_group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        self.module = module
        self.bucket_cap_bytes = bucket_cap_bytes
        self.process_group = process_group
        self.world_size = dist.get_world_size(process_group)
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.bucket_of: dict[int, tuple[int, int]] = {}
        self.ready = [False] * len(self.params)
        self.next_bucket = 0
        self.finish_queued = False
        self.broadcast_parameters()
        self.buckets = self.build_buckets()
        self.register_hooks()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped module's forward: the hooks do the rest during backward."""
        return self.module(*args, **kwargs)

    # ===== EXERCISE 6.4: a bucketed DDP whose all-reduces overlap backward ===============
    #
    # Points: 20 (in proportion to the tests of ex06_4 that pass; `make grade EX=6.4`)
    #
    # Write the five methods below; __init__ calls the first three, autograd the last two.
    # The grader trains your wrapper as a user trains PyTorch's DDP, and calls nothing else:
    #
    #     opt.zero_grad(); model(x).square().mean().backward(); opt.step()
    #
    # (a) broadcast_parameters: every parameter of self.module from the group's rank 0.
    # (b) build_buckets: the buckets, their flat buffers and views; fill self.bucket_of.
    # (c) register_hooks: one post-accumulate-grad hook per parameter of self.params.
    # (d) on_gradient_ready(i): parameter i's gradient is in: copy it into its view, count it,
    #     launch every bucket that is now ready — in bucket order, asynchronously.
    # (e) finish: runs once backward has ended: wait, average, copy back, re-arm.
    #
    # Hints:
    #   1. Collectives are matched by the order each rank calls them, not by their tensor:
    #      bucket b may start only after buckets 0 … b−1 (exercise 6.1). Keep the next bucket
    #      to launch in self.next_bucket.
    #   2. dist.broadcast and dist.all_reduce work in place and take group=...; with
    #      async_op=True all_reduce returns at once with a work whose wait() blocks until the
    #      sum is in. A wait() inside a hook stalls backward: nothing overlaps any more.
    #      The group's rank 0 has a global rank of its own: dist.get_global_rank(group, 0).
    #   3. The members of each bucket: the rule you wrote in exercise 5.1, imported above
    #      as assign_buckets — sizes in bytes (numel × element_size), the cap as both caps.
    #      A view shares memory with its buffer: fill the view and the buffer is filled.
    #      torch.Tensor.split gives consecutive pieces; .view_as(p) shapes one like p.
    #   4. p.register_post_accumulate_grad_hook(fn) calls fn(p) once p.grad holds this
    #      backward's gradient. A lambda made in a loop sees the loop variable's *last*
    #      value unless you bind it (lambda param, i=i: ...).
    #   5. Nobody calls finish for you: from the first hook of a backward, queue it with
    #      torch.autograd.Variable._execution_engine.queue_callback(self.finish); autograd
    #      runs it when this backward has ended (self.finish_queued remembers you did).
    #   6. A parameter that got no gradient (a layer forward did not use) never calls its
    #      hook, so its bucket — and every later one — is never ready: finish launches them,
    #      that parameter contributing zeros, and leaves its .grad as it was (None).
    #      Frozen parameters (requires_grad=False) are not in self.params at all.
    #   7. The all-reduce sums: divide by self.world_size. Reset the counters for the next
    #      backward.
    #
    # What is graded (tests/exercises/test_ch06_capstone_ddp.py, `make grade EX=6.4`), on
    # 2, 3 and 4 real processes, an MLP 13 → 37 → 29 → 11 → 7, bucket caps of 370 B (a layer's
    # bias and weight in different buckets), 1 B and 10⁶ B:
    #   - the parameters equal torch.nn.parallel.DistributedDataParallel's after 3 SGD steps
    #     (replicas built with different seeds: the broadcast must make them equal);
    #   - per step exactly one dist.all_reduce per bucket, async_op=True, in bucket order,
    #     as many buckets as simulator.ddp.assign_buckets makes, each its own buffer;
    #   - a bucket's all-reduce starts before backward's last gradient, and none is waited
    #     for before it; on a larger MLP traced at 2 ranks, the share of communication
    #     time that ran during backward is at least half of what simulator.ddp.predict_step
    #     predicts from this host's measured layer and all-reduce times;
    #   - a cap below one parameter: one parameter per bucket; a frozen layer and a layer
    #     forward never uses: parameters equal PyTorch DDP's with find_unused_parameters;
    #   - 4 ranks in two process groups {0, 1} and {2, 3}: each group equals PyTorch DDP's
    #     on that group.
    # ===================================================================================

    def broadcast_parameters(self) -> None:
        """Make every replica equal to the group's rank 0."""
        # EXERCISE 6.4 (a): see the banner above
        raise NotImplementedError("EXERCISE 6.4: implement BucketedDDP.broadcast_parameters in "
                                  "exercises/ch06_capstone_ddp.py")

    def build_buckets(self) -> list[Bucket]:
        """Buckets in reverse registration order, their buffers and views; fills bucket_of."""
        # EXERCISE 6.4 (b): see the banner above
        raise NotImplementedError("EXERCISE 6.4: implement BucketedDDP.build_buckets in "
                                  "exercises/ch06_capstone_ddp.py")

    def register_hooks(self) -> None:
        """One post-accumulate-grad hook per parameter, calling on_gradient_ready."""
        # EXERCISE 6.4 (c): see the banner above
        raise NotImplementedError("EXERCISE 6.4: implement BucketedDDP.register_hooks in "
                                  "exercises/ch06_capstone_ddp.py")

    def on_gradient_ready(self, i: int) -> None:
        """Parameter ``i``'s gradient is accumulated: bucket it, launch what is ready."""
        # EXERCISE 6.4 (d): see the banner above
        raise NotImplementedError("EXERCISE 6.4: implement BucketedDDP.on_gradient_ready in "
                                  "exercises/ch06_capstone_ddp.py")

    def finish(self) -> None:
        """End of backward: launch what is left, wait, average, copy back; re-arm."""
        # EXERCISE 6.4 (e): see the banner above
        raise NotImplementedError("EXERCISE 6.4: implement BucketedDDP.finish in "
                                  "exercises/ch06_capstone_ddp.py")
