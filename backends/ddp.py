"""DistributedDataParallel from scratch: a Reducer all-reduces gradient buckets during backward.

Twin of :mod:`simulator.ddp`; book chapters 5–6; Li et al., "PyTorch Distributed", VLDB 2020.
Usage mirrors ``torch.nn.parallel.DistributedDataParallel``::

    model = DistributedDataParallel(net, bucket_cap_mb=25)
    loss_fn(model(x), y).backward()      # gradients are averaged over ranks when this returns
    optimizer.step()

What happens, in the order the paper tells it:

1. **Broadcast** — at construction rank 0's parameters and buffers are broadcast, so every
   replica starts equal (and buffers again before every forward, ``broadcast_buffers``).
2. **Buckets** — the :class:`Reducer` groups the trainable parameters with
   :func:`simulator.ddp.assign_buckets` (reverse registration order, ``bucket_cap_mb``, first
   bucket 1 MiB by default) into :class:`Bucket`\\ s, each one flat buffer.
3. **Hooks** — ``register_post_accumulate_grad_hook`` on every parameter: when autograd has
   accumulated a gradient, the hook copies it, divided by the world size, into its bucket's
   view and marks it ready. When a bucket's last gradient is in, the bucket is *ready*; ready
   buckets are launched **in bucket order** as asynchronous all-reduces (``async_op=True``),
   so communication overlaps the rest of backward.
4. **Finalize** — a callback queued on the autograd engine runs when backward ends: it waits
   for every bucket's all-reduce and copies the averaged buffers back into ``param.grad``.
5. **no_sync()** — inside it, backward only accumulates local gradients; the first backward
   outside it reduces the accumulated sum.
6. **find_unused_parameters** — after forward, the autograd graph is walked from the outputs;
   parameters it does not reach are marked ready at once (zero contribution), and a bitmap of
   locally used parameters is all-reduced so that a parameter unused on *every* rank keeps its
   gradient untouched, as PyTorch does.
7. **Join** — see :mod:`backends.ddp_join`: ranks that run out of inputs shadow the others'
   collectives (:meth:`DistributedDataParallel.join_hook`).

Tracing (:class:`backends.trace.Tracer`): per bucket a ``ready`` span (first gradient in →
bucket ready) and an ``allreduce`` span (launch → completion, timed by a future callback on
gloo's worker thread).

PyTorch differs in one visible way: its first iteration uses a single bucket and it rebuilds
the buckets from the order gradients arrived (``Reducer::rebuild_buckets``); for models whose
gradients arrive in reverse registration order (MLPs, CNNs) that is the assignment we use from
the start. With ``find_unused_parameters=True`` PyTorch keeps its initial assignment.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.ddp_join import Join, JoinHook
from backends.device import device, on_device, to_device
from backends.trace import Tracer
from simulator.ddp import assign_buckets, bucket_caps


class Bucket:
    """One flat buffer holding several parameters' gradients, all-reduced as one message."""

    def __init__(self, index: int, params: list[nn.Parameter], indices: list[int]) -> None:
        self.index = index
        self.params = params
        self.indices = indices  # positions in the Reducer's parameter list
        self.numel = sum(p.numel() for p in params)
        self.buffer = torch.zeros(self.numel, dtype=params[0].dtype, device=params[0].device)
        self.views: list[torch.Tensor] = []
        offset = 0
        for p in params:
            self.views.append(self.buffer[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        self.pending = len(params)
        self.work: Any = None
        self.first_ready_s = 0.0

    @property
    def nbytes(self) -> int:
        """Size of the flat buffer, bytes."""
        return self.numel * self.buffer.element_size()


class Reducer:
    """Buckets, gradient hooks, in-order asynchronous all-reduces (``reducer.cpp``'s job)."""

    def __init__(self, params: list[nn.Parameter], group: dist.ProcessGroup | None,
                 bucket_cap_bytes: int, first_bucket_bytes: int,
                 find_unused_parameters: bool = False, tracer: Tracer | None = None,
                 overlap: bool = True) -> None:
        self.params, self.group, self.tracer = params, group, tracer
        self.overlap = overlap
        self.world_size = dist.get_world_size(group)
        self.find_unused_parameters = find_unused_parameters
        sizes = [p.numel() * p.element_size() for p in params]
        dtypes = [str(p.dtype) for p in params]
        self.buckets = [Bucket(b, [params[i] for i in members], members) for b, members
                        in enumerate(assign_buckets(sizes, bucket_cap_bytes, first_bucket_bytes,
                                                    dtypes))]
        self.where = {i: (b.index, k) for b in self.buckets for k, i in enumerate(b.indices)}
        self.expect_hooks = False
        self.next_bucket = 0
        self.finalize_queued = False
        self.used = torch.zeros(len(params), dtype=torch.int32, device=device())
        self.handles = [p.register_post_accumulate_grad_hook(  # type: ignore[no-untyped-call]
            self._hook(i)) for i, p in enumerate(params)]

    # -- per step ------------------------------------------------------------------------------

    def prepare_for_backward(self, outputs: Any) -> None:
        """Arm the hooks for the next backward (called at the end of each synced forward)."""
        for bucket in self.buckets:
            bucket.pending, bucket.work = len(bucket.params), None
        self.next_bucket, self.finalize_queued, self.expect_hooks = 0, False, True
        self.used.zero_()
        if self.find_unused_parameters:
            reached = _reachable_params(outputs)
            for i, p in enumerate(self.params):
                if id(p) not in reached:
                    self._mark_ready(i, None)

    def _hook(self, i: int) -> Any:
        def hook(param: torch.Tensor) -> None:
            if not self.expect_hooks:
                return  # under no_sync(), or a backward with no synced forward before it
            if not self.finalize_queued:
                self.finalize_queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._finalize)
            self.used[i] = 1
            self._mark_ready(i, param.grad)
        return hook

    def _mark_ready(self, i: int, grad: torch.Tensor | None) -> None:
        """Copy a gradient (÷ world size) into its bucket; launch every bucket now ready."""
        b, k = self.where[i]
        bucket = self.buckets[b]
        if bucket.pending == len(bucket.params):
            bucket.first_ready_s = time.perf_counter()
        if grad is None:
            bucket.views[k].zero_()
        else:
            torch.mul(grad, 1.0 / self.world_size, out=bucket.views[k])
        bucket.pending -= 1
        if bucket.pending == 0 and self.tracer is not None and self.tracer.enabled:
            self.tracer.trace.record(self.tracer.rank, "ready", f"bucket {b} ready",
                                     bucket.first_ready_s, time.perf_counter(), bucket.nbytes)
        if self.overlap:
            self._launch_ready()

    def _launch_ready(self) -> None:
        """Launch, in bucket order, every bucket that is ready and not yet launched."""
        while (self.next_bucket < len(self.buckets)
               and self.buckets[self.next_bucket].pending == 0):
            self._launch(self.buckets[self.next_bucket])
            self.next_bucket += 1

    def _launch(self, bucket: Bucket) -> None:
        start = time.perf_counter()
        bucket.work = dist.all_reduce(bucket.buffer, group=self.group, async_op=True)
        tracer = self.tracer
        if tracer is not None and tracer.enabled:
            def done(_: Any, b: Bucket = bucket) -> None:
                tracer.trace.record(tracer.rank, "allreduce", f"all-reduce bucket {b.index}",
                                    start, time.perf_counter(), b.nbytes)
            bucket.work.get_future().then(done)

    def _finalize(self) -> None:
        """End of backward: wait for every bucket, copy the averages back into the gradients."""
        self.expect_hooks = False
        self._launch_ready()  # overlap=False: everything starts only now
        if self.next_bucket < len(self.buckets):
            left = len(self.buckets) - self.next_bucket
            raise RuntimeError(
                f"rank {dist.get_rank()}: backward ended with {left} gradient bucket(s) never "
                "ready; some parameters got no gradient — pass find_unused_parameters=True")
        for bucket in self.buckets:
            bucket.work.wait()
        unused = None
        if self.find_unused_parameters:
            dist.all_reduce(self.used, group=self.group)
            unused = self.used == 0
        for bucket in self.buckets:
            for i, p, view in zip(bucket.indices, bucket.params, bucket.views, strict=True):
                if unused is not None and unused[i]:
                    continue  # unused on every rank: PyTorch leaves its gradient alone
                if p.grad is None:
                    p.grad = view.clone()
                else:
                    p.grad.copy_(view)

    # -- Join: what a rank with no inputs left does instead of a backward ---------------------

    def shadow_backward(self) -> None:
        """The collectives of one backward with zero gradients (for ranks that have joined)."""
        for bucket in self.buckets:
            bucket.buffer.zero_()
            dist.all_reduce(bucket.buffer, group=self.group)
        if self.find_unused_parameters:
            self.used.zero_()
            dist.all_reduce(self.used, group=self.group)


def _reachable_params(outputs: Any) -> set[int]:
    """``id`` of every leaf tensor the autograd graph of ``outputs`` reaches."""
    stack = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
    seen: set[Any] = set()
    found: set[int] = set()
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        variable = getattr(fn, "variable", None)  # AccumulateGrad nodes hold their leaf
        if variable is not None:
            found.add(id(variable))
        stack.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)
    return found


def _tensors(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item)


class DistributedDataParallel(nn.Module):
    """Wraps ``module``; its backward leaves gradients averaged over the ranks of ``group``.

    Args:
        module: the model replica of this rank; moved to the rank's device
            (:func:`backends.device.device`), where :meth:`forward` moves its inputs too.
        process_group: the ranks that train together (``None``: all).
        bucket_cap_mb: bucket cap, MiB (``None``: 25, with a 1 MiB first bucket).
        find_unused_parameters: walk the graph after forward and mark parameters it does not
            reach as ready.
        broadcast_buffers: broadcast rank 0's buffers before every forward.
        tracer: records ``ready`` and ``allreduce`` spans per bucket.
        overlap: launch a bucket's all-reduce as soon as it is ready (DDP); ``False`` waits
            for the end of backward (a teaching switch: what overlap buys).
    """

    def __init__(self, module: nn.Module, process_group: dist.ProcessGroup | None = None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 broadcast_buffers: bool = True, tracer: Tracer | None = None,
                 overlap: bool = True) -> None:
        super().__init__()
        self.module = module = on_device(module)
        self.process_group = process_group
        self.broadcast_buffers = broadcast_buffers
        self.require_backward_grad_sync = True
        root = dist.get_global_rank(process_group, 0) if process_group is not None else 0
        self._root = root
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                dist.broadcast(tensor, root, group=process_group)
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ValueError("DistributedDataParallel needs at least one parameter that "
                             "requires a gradient")
        cap, first = bucket_caps(bucket_cap_mb)
        self.reducer = Reducer(params, process_group, cap, first, find_unused_parameters,
                               tracer, overlap)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The module's forward; arms the Reducer when gradients will be synchronised."""
        Join.notify_join_context(self)
        if self.broadcast_buffers:
            self._sync_buffers()
        output = self.module(*to_device(args), **to_device(kwargs))
        if torch.is_grad_enabled() and self.require_backward_grad_sync:
            self.reducer.prepare_for_backward(output)
        return output

    def _sync_buffers(self) -> None:
        with torch.no_grad():
            for buffer in self.module.buffers():
                dist.broadcast(buffer, self._root, group=self.process_group)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward inside accumulates gradients locally; the next synced backward reduces."""
        old, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # -- Join ----------------------------------------------------------------------------------

    def join_hook(self) -> JoinHook:
        """Shadow one training step's collectives; at the end, agree on the final model."""
        def main_hook() -> None:
            if self.broadcast_buffers:
                self._sync_buffers()
            self.reducer.shadow_backward()

        def post_hook(is_last_joiner: bool) -> None:
            self._sync_final_model(is_last_joiner)

        return JoinHook(main_hook, post_hook)

    @property
    def join_process_group(self) -> dist.ProcessGroup | None:
        """The group the Join context counts ranks on."""
        return self.process_group

    def _sync_final_model(self, is_last_joiner: bool) -> None:
        """Broadcast the parameters of a rank that trained to the end (the highest last joiner):
        ranks that joined early skipped the last optimizer steps."""
        me = dist.get_rank()
        candidate = torch.tensor([me if is_last_joiner else -1], device=device())
        dist.all_reduce(candidate, op=dist.ReduceOp.MAX, group=self.process_group)
        with torch.no_grad():
            for tensor in [*self.module.parameters(), *self.module.buffers()]:
                dist.broadcast(tensor, int(candidate), group=self.process_group)
