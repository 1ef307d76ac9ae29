"""MultiWorkerMirroredStrategy from scratch: mirrored replicas in several processes (ch. 18).

``tf.distribute.MultiWorkerMirroredStrategy`` is :class:`~backends.tf_distribute.mirrored.
MirroredStrategy` stretched over *workers* — processes, usually on different machines, each
with its own local devices. Everything a replica does is the same (``run``, mirrored
variables, ``apply_gradients``); two things change:

1. **the cross-device op** is :class:`~backends.tf_distribute.cross_device_ops.
   CollectiveAllReduce` (TF: ``CollectiveAllReduce``, with ``CommunicationImplementation.RING``
   or ``NCCL``): the local replicas' gradients are added, then all-reduced *between the
   processes* by our ring (:mod:`backends.collectives.all_reduce`) once per step;
2. **variables and input are per worker**: every worker builds the model itself, so
   :meth:`MultiWorkerMirroredStrategy.mirror` first broadcasts the chief's (worker 0's)
   parameters — TF broadcasts initial values the same way — and
   :meth:`~MultiWorkerMirroredStrategy.distribute_batch` keeps only this worker's slices of
   the global batch (TF's auto-sharding ``DATA`` policy).

The processes are ours: :func:`backends.launch.spawn` starts them with a gloo process group;
a worker finds itself with ``torch.distributed.get_rank()`` (TF reads ``TF_CONFIG``'s
``task``). ``num_replicas_in_sync`` counts every replica of every worker, so
:func:`~backends.tf_distribute.mirrored.compute_average_loss` with the global batch gives
the same gradient as one process training on the whole batch.

Try it (two workers, one CPU replica each)::

    python -c "from backends.launch import spawn; \\
        from backends.tf_distribute.multi_worker import demo; print(spawn(demo, 2))"
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor, nn

from backends.tf_distribute.cross_device_ops import CollectiveAllReduce, pack, unpack
from backends.tf_distribute.mirrored import (
    SGD,
    DeviceLike,
    MirroredModule,
    MirroredStrategy,
    train_step,
)
from backends.tf_distribute.values import PerReplica, ReduceOp, combine
from simulator.tf_distribute.mirrored import replica_rows


class MultiWorkerMirroredStrategy(MirroredStrategy):
    """Synchronous replicas over the processes of a ``torch.distributed`` group
    (``tf.distribute.MultiWorkerMirroredStrategy``), call it in every worker.

    Args:
        devices: this worker's local devices, one replica each (default: one CPU).
        implementation: the collective between workers (see :class:`CollectiveAllReduce`).
        num_packs: packs the gradients are cut into for the all-reduce.
    """

    def __init__(self, devices: Sequence[DeviceLike] | None = None,
                 implementation: str = "ring", num_packs: int = 1) -> None:
        if not dist.is_initialized():
            raise RuntimeError("MultiWorkerMirroredStrategy needs a process group: start the "
                               "workers with backends.launch.spawn (or torchrun)")
        super().__init__(devices or ["cpu"], CollectiveAllReduce(implementation), num_packs)
        self.worker_index, self.num_workers = dist.get_rank(), dist.get_world_size()

    @property
    def num_replicas_in_sync(self) -> int:
        """Replicas of every worker."""
        return self.num_workers * len(self.devices)

    @property
    def first_replica(self) -> int:
        """The id of this worker's first replica: ``worker_index · local devices``."""
        return self.worker_index * len(self.devices)

    @property
    def is_chief(self) -> bool:
        """Worker 0, whose variables everyone starts from (TF's chief)."""
        return self.worker_index == 0

    def mirror(self, module: nn.Module) -> MirroredModule:
        """The chief's parameters and buffers broadcast to every worker (one packed message),
        then mirrored on this worker's devices."""
        tensors = [*module.parameters(), *module.buffers()]
        if tensors and self.num_workers > 1:
            from backends.collectives.broadcast import binomial_broadcast

            flat = pack(tensors)
            binomial_broadcast(flat, 0)
            with torch.no_grad():
                for t, received in zip(tensors, unpack(flat, tensors), strict=True):
                    t.copy_(received)
        return MirroredModule(module, self.devices)

    def distribute_batch(self, batch: Tensor) -> PerReplica:
        """This worker's slices of the global ``batch``: it is cut into
        ``num_replicas_in_sync`` slices (``torch.chunk``'s rule, empty slices where rows run
        out); worker ``w`` keeps slices ``w·L … w·L + L − 1`` for ``L`` local devices."""
        slices = torch.split(batch, replica_rows(batch.size(0), self.num_replicas_in_sync))
        local = len(self.devices)
        mine = slices[self.worker_index * local:(self.worker_index + 1) * local]
        return PerReplica([s.to(d, copy=True) for s, d in zip(mine, self.devices, strict=True)])

    def reduce(self, op: ReduceOp, value: PerReplica | Tensor, axis: int | None = None
               ) -> Tensor:
        """The ``op`` of every replica of every worker (each worker gets it): the local
        components combined, then all-reduced between workers (``axis`` as
        :meth:`MirroredStrategy.reduce`; MEAN with ``axis=0`` is not offered here)."""
        if not isinstance(value, PerReplica):
            return value
        if axis is not None and op is ReduceOp.MEAN:
            raise ValueError("reduce(MEAN, axis=0) across workers needs the global row count; "
                             "reduce SUM and divide by the global batch instead")
        parts = [p.sum(axis) if axis is not None else p for p in value.values]
        local = combine(ReduceOp.SUM, parts, self.devices[0]).reshape(-1)
        self.cross_device_ops.all_reduce(ReduceOp.SUM, [local])
        if op is ReduceOp.MEAN:
            local.div_(self.num_replicas_in_sync)
        return local.view_as(parts[0])


def demo(steps: int = 3, global_batch: int = 7, seed: int = 0) -> list[float]:
    """Rank function: a few SGD steps of a small linear model under the strategy, every
    worker starting from different weights (the chief's win); returns the final weights of
    this worker, equal on every worker."""
    torch.manual_seed(seed + dist.get_rank())
    strategy = MultiWorkerMirroredStrategy()
    model = strategy.mirror(nn.Linear(4, 1))
    gen = torch.Generator().manual_seed(seed)
    optimizer = SGD(0.1)
    for _ in range(steps):
        x, y = torch.randn(global_batch, 4, generator=gen), torch.randn(global_batch, 1,
                                                                        generator=gen)
        strategy.run(train_step, (model, strategy.distribute_batch(x),
                                  strategy.distribute_batch(y), global_batch, optimizer))
    weight = model.variables[0].read_value()
    return [float(v) for v in weight.detach().reshape(-1)]
