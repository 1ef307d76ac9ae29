"""Chapter 6 capstone, reference answer: a bucketed DDP whose all-reduces overlap backward.

:class:`BucketedDDP` is DistributedDataParallel written whole, the way Li et al. ("PyTorch
Distributed", VLDB 2020, §3.2) and textbook chapters 5–6 tell it:

1. **Broadcast** — at construction, rank 0 of the group sends its parameters to every other
   rank, so all replicas start equal.
2. **Buckets** — the trainable parameters, in *reverse* registration order (the order
   backward produces their gradients), are grouped into buckets of at least
   ``bucket_cap_bytes`` (:func:`simulator.ddp.assign_buckets`); each bucket is one flat
   buffer, and every parameter's gradient has a view into it.
3. **Hooks** — a post-accumulate-grad hook per parameter copies its gradient into its view.
   When a bucket's last gradient is in, the bucket is ready; ready buckets start an
   asynchronous all-reduce (``async_op=True``) **in bucket order**, so communication runs
   while backward computes the remaining gradients.
4. **Finish** — queued on the autograd engine by the first hook of a backward, it runs when
   backward ends: it launches the buckets a parameter without gradient kept from being ready
   (that parameter contributes zeros), waits for every all-reduce, divides by the world size
   and copies the averages back into the gradients.

A parameter that got no gradient this backward on this rank keeps ``.grad`` as it was — the
right answer when it is unused on every rank (PyTorch's ``find_unused_parameters=True`` does
the same); a parameter unused on some ranks only would need their agreement (PyTorch
all-reduces a bitmap of used parameters), which this capstone leaves out.

The lab's full version, with ``no_sync`` and Join, is :mod:`backends.ddp`. The exercise is in
``exercises/ch06_capstone_ddp.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from simulator.ddp import assign_buckets


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

    def broadcast_parameters(self) -> None:
        """Make every replica equal to the group's rank 0."""
        root = 0 if self.process_group is None else dist.get_global_rank(self.process_group, 0)
        with torch.no_grad():
            for p in self.module.parameters():
                dist.broadcast(p, root, group=self.process_group)

    def build_buckets(self) -> list[Bucket]:
        """Buckets in reverse registration order, their buffers and views; fills bucket_of."""
        sizes = [p.numel() * p.element_size() for p in self.params]
        dtypes = [str(p.dtype) for p in self.params]
        buckets = []
        for b, members in enumerate(assign_buckets(sizes, self.bucket_cap_bytes,
                                                   self.bucket_cap_bytes, dtypes)):
            params = [self.params[i] for i in members]
            numels = [p.numel() for p in params]
            buffer = torch.zeros(sum(numels), dtype=params[0].dtype)
            views = [piece.view_as(p) for p, piece in zip(params, buffer.split(numels),
                                                         strict=True)]
            buckets.append(Bucket(members, buffer, views, len(members)))
            for k, i in enumerate(members):
                self.bucket_of[i] = (b, k)
        return buckets

    def register_hooks(self) -> None:
        """One post-accumulate-grad hook per parameter, calling on_gradient_ready."""
        for i, p in enumerate(self.params):
            # i=i binds this parameter's index now; a bare closure would see the last i
            p.register_post_accumulate_grad_hook(  # type: ignore[no-untyped-call]
                lambda param, i=i: self.on_gradient_ready(i))

    def on_gradient_ready(self, i: int) -> None:
        """Parameter ``i``'s gradient is accumulated: bucket it, launch what is ready."""
        if not self.finish_queued:  # the first hook of this backward
            self.finish_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self.finish)
        b, k = self.bucket_of[i]
        bucket = self.buckets[b]
        bucket.views[k].copy_(self.params[i].grad)
        self.ready[i] = True
        bucket.pending -= 1
        self._launch_ready()

    def _launch_ready(self) -> None:
        """Launch, in bucket order, every bucket with nothing pending."""
        while (self.next_bucket < len(self.buckets)
               and self.buckets[self.next_bucket].pending == 0):
            bucket = self.buckets[self.next_bucket]
            bucket.work = dist.all_reduce(bucket.buffer, group=self.process_group,
                                          async_op=True)
            self.next_bucket += 1

    def finish(self) -> None:
        """End of backward: launch what is left, wait, average, copy back; re-arm."""
        for bucket in self.buckets[self.next_bucket:]:
            for k, i in enumerate(bucket.indices):
                if not self.ready[i]:  # no gradient this backward: it contributes zeros
                    bucket.views[k].zero_()
                    bucket.pending -= 1
        self._launch_ready()
        for bucket in self.buckets:
            bucket.work.wait()
            bucket.buffer.div_(self.world_size)
            for k, i in enumerate(bucket.indices):
                grad = self.params[i].grad
                if self.ready[i] and grad is not None:
                    grad.copy_(bucket.views[k])
            bucket.pending, bucket.work = len(bucket.indices), None
        self.ready = [False] * len(self.params)
        self.next_bucket, self.finish_queued = 0, False
