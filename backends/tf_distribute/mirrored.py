"""MirroredStrategy from scratch: one process, one replica per device, mirrored variables (ch. 18).

TensorFlow's ``tf.distribute.MirroredStrategy`` trains synchronously on the devices of one
machine. What it does, and the piece of this module that does it:

1. **Mirrored variables** — a model built under the strategy gets one copy of every variable
   on every device (TF: ``MirroredVariable``). :meth:`MirroredStrategy.mirror` does that to a
   ``torch.nn.Module``: a :class:`MirroredModule` holds a deep copy per device, and
   ``variables`` pairs the copies of each parameter as a :class:`~backends.tf_distribute.
   values.MirroredVariable`.
2. **Distributed input** — the global batch is cut into one slice per replica
   (:meth:`MirroredStrategy.distribute_batch`; TF: ``experimental_distribute_dataset``),
   a :class:`~backends.tf_distribute.values.PerReplica`. An awkward batch (7 rows on 3
   replicas) gives slices of different sizes, so a replica's loss is scaled by the *global*
   batch (:func:`compute_average_loss`, TF's ``tf.nn.compute_average_loss``), never by its own.
3. **run** — ``strategy.run(fn, args)`` calls ``fn`` once per replica, each in its own thread
   (TF runs one thread per device too), with every distributed argument replaced by that
   replica's component (:func:`~backends.tf_distribute.values.local_value`); it returns the
   results as ``PerReplica`` values.
4. **The gradient all-reduce** — inside ``fn`` a replica calls ``ReplicaContext.all_reduce``
   (TF: ``tf.distribute.get_replica_context().all_reduce``; ``optimizer.apply_gradients``
   calls it for you). That is a *merge call*: each replica thread deposits its tensors and
   waits; the last to arrive runs the strategy's cross-device op
   (:mod:`~backends.tf_distribute.cross_device_ops`) on all of them, and every replica goes on
   with the same sum. :class:`SGD` does it in ``apply_gradients`` and then lets every replica
   update its own copy with the same gradient: the copies stay equal.
5. **reduce** — ``strategy.reduce(ReduceOp.SUM, per_replica)`` outside the replicas makes one
   value of a ``PerReplica`` (a loss to print).

Devices: ``cuda:i`` where CUDA is present, otherwise CPU "devices": ``["cpu"] * k`` are ``k``
replicas in threads of this process, every transfer between them a real copy.

Try it::

    python -c "import torch; from backends.tf_distribute import MirroredStrategy; \\
        s = MirroredStrategy(['cpu'] * 3); print(s.run(lambda: torch.ones(1)))"
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from backends.device import local_devices
from backends.tf_distribute.cross_device_ops import CrossDeviceOps, RingAllReduce, pack, unpack
from backends.tf_distribute.values import (
    DistributedValues,
    MirroredVariable,
    PerReplica,
    ReduceOp,
    SyncOnReadVariable,
    VariableAggregation,
    local_value,
    regroup,
    replica_context,
    replica_scope,
)
from simulator.tf_distribute.mirrored import replica_rows

DeviceLike = torch.device | str | int


class MirroredModule(DistributedValues):
    """A model mirrored on every device: ``values[i]`` is replica ``i``'s copy (a module).

    ``variables`` holds one :class:`MirroredVariable` per parameter, in ``parameters()``
    order (TF: ``model.trainable_variables`` under the strategy).
    """

    def __init__(self, module: nn.Module, devices: Sequence[torch.device]) -> None:
        super().__init__([copy.deepcopy(module).to(d) for d in devices])
        per_copy = [list(m.named_parameters()) for m in self.values]
        self.variables = [MirroredVariable([c[i][1] for c in per_copy], name)
                          for i, (name, _) in enumerate(per_copy[0])]

    def in_sync(self, atol: float = 0.0) -> bool:
        """Whether every parameter's copies are equal."""
        return all(v.in_sync(atol) for v in self.variables)

    def primary(self) -> nn.Module:
        """The first device's copy (any copy would do: they are equal)."""
        return self.values[0]  # type: ignore[no-any-return]


class ReplicaContext:
    """What a replica sees of its strategy while it runs (``tf.distribute.ReplicaContext``):
    its id, the replica count, and the collective :meth:`merge_call` / :meth:`all_reduce`.
    ``local_id`` numbers the replicas of this process; ``replica_id_in_sync_group`` all of
    them (several workers: worker ``w``'s start at ``w·local replicas``)."""

    def __init__(self, strategy: MirroredStrategy, local_id: int, merge: _Merge) -> None:
        self.strategy, self.local_id = strategy, local_id
        self.replica_id_in_sync_group = strategy.first_replica + local_id
        self._merge = merge

    @property
    def num_replicas_in_sync(self) -> int:
        """Replicas taking part in every all-reduce."""
        return self.strategy.num_replicas_in_sync

    def merge_call(self, fn: Callable[..., Any], args: tuple[Any, ...] = ()) -> Any:
        """Every replica calls this with its own ``args``; ``fn(strategy, *per_replica_args)``
        runs once, in the cross-replica context, with each argument a ``PerReplica`` of all
        the replicas' ones, and every replica gets its result. A barrier: all replicas must
        call it, in the same order."""
        return self._merge.call(self.local_id, fn, args)

    def all_reduce(self, op: ReduceOp, tensors: Sequence[Tensor]) -> list[Tensor]:
        """The ``op`` of every replica's ``tensors`` (one list per replica, same shapes),
        through the strategy's cross-device op: this replica's copy of the result. Each
        replica packs its tensors into one flat buffer in its own thread
        (:func:`~backends.tf_distribute.cross_device_ops.pack`); the merge call all-reduces
        the buffers in place."""
        flat = pack(tensors)

        def reduce_all(strategy: MirroredStrategy, flats: PerReplica) -> None:
            if flats.values[0].numel():
                strategy.cross_device_ops.all_reduce_packs(op, flats.values, strategy.num_packs)

        self.merge_call(reduce_all, (flat,))
        return unpack(flat, tensors)


class _Merge:
    """The rendezvous of a merge call: replica threads deposit their arguments; the last one
    runs the function; all wake up with its result."""

    def __init__(self, strategy: MirroredStrategy, replicas: int) -> None:
        self.strategy, self.replicas = strategy, replicas
        self.barrier = threading.Barrier(replicas)
        self.args: list[Any] = [None] * replicas
        self.result: Any = None
        self.error: BaseException | None = None

    def call(self, replica: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        self.args[replica] = args
        if self.barrier.wait() == 0:  # exactly one thread: run fn for everyone
            try:
                per_arg = [PerReplica([a[i] for a in self.args]) for i in range(len(args))]
                with replica_scope(None, None):
                    self.result, self.error = fn(self.strategy, *per_arg), None
            except BaseException as exc:  # re-raised in every replica below
                self.error = exc
        self.barrier.wait()
        if self.error is not None:
            raise RuntimeError(f"merge_call failed: {self.error}") from self.error
        result = self.result
        self.barrier.wait()  # nobody starts the next merge before all have read this one
        return result


class MirroredStrategy:
    """Synchronous replicas on the devices of one process (``tf.distribute.MirroredStrategy``,
    one kind of ``tf.distribute.Strategy``: ``run``, ``reduce``, variables per device).

    Args:
        devices: one per replica, e.g. ``["cuda:0", "cuda:1"]`` or ``["cpu"] * 4``
            (default: :func:`backends.device.local_devices`, TF's: all GPUs, else the CPU).
        cross_device_ops: the gradient all-reduce (default :class:`RingAllReduce`, TF's
            default ``NcclAllReduce`` on GPUs).
        num_packs: how many packs the gradients are cut into for the all-reduce.
    """

    def __init__(self, devices: Sequence[DeviceLike] | None = None,
                 cross_device_ops: CrossDeviceOps | None = None, num_packs: int = 1) -> None:
        self.devices = [torch.device(d) for d in devices] if devices else local_devices()
        self.cross_device_ops = cross_device_ops or RingAllReduce()
        self.num_packs = num_packs

    @property
    def num_replicas_in_sync(self) -> int:
        """Replicas that take part in every step."""
        return len(self.devices)

    @property
    def first_replica(self) -> int:
        """The id (in the sync group) of this process's first replica."""
        return 0

    # ---- variables and input ----------------------------------------------------------------

    def mirror(self, module: nn.Module) -> MirroredModule:
        """A copy of ``module`` on every device, its parameters as mirrored variables (TF:
        building the model inside ``strategy.scope()``)."""
        return MirroredModule(module, self.devices)

    def sync_on_read(self, initial: Tensor,
                     aggregation: VariableAggregation = VariableAggregation.SUM
                     ) -> SyncOnReadVariable:
        """A :class:`SyncOnReadVariable` with a copy of ``initial`` on every device."""
        return SyncOnReadVariable(initial, self.devices, aggregation)

    def distribute_batch(self, batch: Tensor) -> PerReplica:
        """The global ``batch`` cut along dim 0, one slice per replica on its device (rows
        ``⌈n/k⌉`` each, as ``torch.chunk``; a replica left without rows gets an empty slice,
        so every replica still joins every all-reduce)."""
        slices = torch.split(batch, replica_rows(batch.size(0), self.num_replicas_in_sync))
        return PerReplica([s.to(d, copy=True) for s, d in zip(slices, self.devices, strict=True)])

    # ---- run and reduce ---------------------------------------------------------------------

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...] = (),
            kwargs: dict[str, Any] | None = None) -> Any:
        """``fn(*args, **kwargs)`` on every local replica, one thread each; distributed arguments
        are replaced by the replica's component. Returns ``fn``'s results regrouped as
        ``PerReplica`` values (a tuple of results: a tuple of ``PerReplica``)."""
        k = len(self.devices)  # this process's replicas
        merge = _Merge(self, k)
        results: list[Any] = [None] * k
        errors: list[BaseException | None] = [None] * k
        grad_enabled = torch.is_grad_enabled()

        def replica(i: int) -> None:
            try:
                with replica_scope(i, ReplicaContext(self, i, merge)), \
                        torch.set_grad_enabled(grad_enabled):
                    results[i] = fn(*local_value(args), **local_value(kwargs or {}))
            except BaseException as exc:
                errors[i] = exc
                merge.barrier.abort()  # wake the replicas waiting in a merge call

        threads = [threading.Thread(target=replica, args=(i,)) for i in range(k)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, exc in enumerate(errors):  # the first real error, not a broken barrier
            if exc is not None and not isinstance(exc, threading.BrokenBarrierError):
                raise RuntimeError(f"replica {i} on {self.devices[i]} failed: {exc}") from exc
        if any(errors):
            raise RuntimeError("a replica failed in a merge call")
        return regroup(results)

    def reduce(self, op: ReduceOp, value: PerReplica | Tensor, axis: int | None = None
               ) -> Tensor:
        """One tensor on the first device from a ``PerReplica`` (TF: ``strategy.reduce``):
        with ``axis=None`` the ``op`` of the components; with ``axis=0`` each component is
        first summed (or, for MEAN, concatenated and averaged) along its first axis."""
        if not isinstance(value, PerReplica):
            return value
        parts = list(value.values)
        if axis is not None:
            if op is ReduceOp.MEAN:
                return torch.cat([p.to(self.devices[0]) for p in parts], axis).mean(axis)
            parts = [p.sum(axis) for p in parts]
        return self.cross_device_ops.reduce(op, PerReplica(parts), self.devices[0])

    def gather(self, value: PerReplica, axis: int = 0) -> Tensor:
        """The components concatenated along ``axis`` on the first device (TF:
        ``strategy.gather``)."""
        return torch.cat([v.to(self.devices[0]) for v in value.values], axis)


def compute_average_loss(per_example_loss: Tensor, global_batch_size: int) -> Tensor:
    """The replica's share of the global mean loss: its examples' sum over the *global* batch
    (TF: ``tf.nn.compute_average_loss``). Summed over the replicas (the SUM all-reduce of the
    gradients), this is the mean over the whole batch, however unevenly it was cut."""
    return per_example_loss.sum() / global_batch_size


class SGD:
    """Stochastic gradient descent under a strategy (TF: ``optimizer.apply_gradients`` with
    a ``tf.keras.optimizers.SGD``): in a replica it first SUM-all-reduces the gradients
    across replicas (``ReplicaContext.all_reduce``), then updates this replica's copies —
    every replica applies the same update, so mirrored variables stay equal. Outside a
    strategy it is plain SGD. ``lr`` is the learning rate."""

    def __init__(self, lr: float) -> None:
        self.lr = lr

    @torch.no_grad()
    def apply_gradients(self, grads_and_vars: Iterable[tuple[Tensor | None, Tensor]]) -> None:
        """``v −= lr·g`` for each pair, after the all-reduce of the ``g``\\ s (a missing
        gradient counts as zero, so every replica reduces the same list)."""
        pairs = list(grads_and_vars)
        grads = [torch.zeros_like(v) if g is None else g for g, v in pairs]
        context = replica_context()
        if context is not None:
            grads = context.all_reduce(ReduceOp.SUM, grads)
        for g, (_, v) in zip(grads, pairs, strict=True):
            v.add_(g.to(v.device), alpha=-self.lr)


def train_step(model: nn.Module, x: Tensor, y: Tensor, global_batch: int, optimizer: SGD,
               loss_fn: Callable[[Tensor, Tensor], Tensor] | None = None) -> Tensor:
    """One replica's step, TF's custom-loop shape: per-example loss, scaled by the global
    batch (:func:`compute_average_loss`), gradients, ``apply_gradients``. Returns the
    replica's share of the loss (``strategy.reduce(SUM, …)`` of it is the batch's mean)."""
    loss_fn = loss_fn or (lambda out, t: nn.functional.mse_loss(out, t, reduction="none")
                          .flatten(1).mean(1))
    params = list(model.parameters())
    loss = compute_average_loss(loss_fn(model(x), y), global_batch)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    optimizer.apply_gradients(zip(grads, params, strict=True))
    return loss.detach()


