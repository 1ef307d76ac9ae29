"""Timing a training step under the mirrored strategies: the real side of their twins (ch. 18).

* :func:`measure_mirrored` — in this process: one step of
  :class:`~backends.tf_distribute.mirrored.MirroredStrategy` on ``replicas`` CPU devices
  (replica threads, one intra-op thread each, so a replica is one thread), median of repeats;
* :func:`measure_multi_worker` — rank function: one step of
  :class:`~backends.tf_distribute.multi_worker.MultiWorkerMirroredStrategy` on every worker,
  beside one step of our DDP (:class:`backends.ddp.DistributedDataParallel`) on the same
  shard, repeats interleaved (:func:`backends.measure.measure_many`).

A step is TF's custom training loop: ``strategy.run(train_step, …)`` — forward, the loss
scaled by the global batch, gradients, ``apply_gradients`` (the all-reduce, then SGD on each
copy). The model is ``build(widths)`` (a module-level function of the caller's, so that a
rank can rebuild it), the loss cross-entropy over ``widths[-1]`` classes on random rows.

Units: seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from backends.measure import Timing
from backends.tf_distribute.cross_device_ops import (
    CrossDeviceOps,
    HierarchicalCopyAllReduce,
    ReductionToOneDevice,
    RingAllReduce,
)
from backends.tf_distribute.mirrored import SGD, MirroredStrategy, train_step

Build = Callable[[Sequence[int]], nn.Module]

CROSS_DEVICE_OPS: dict[str, Callable[[], CrossDeviceOps]] = {
    "ring": RingAllReduce, "one_device": ReductionToOneDevice,
    "hierarchical": HierarchicalCopyAllReduce}
"""The in-process all-reduces by name (TF: ``NcclAllReduce``, ``ReductionToOneDevice``,
``HierarchicalCopyAllReduce``)."""


def per_example_cross_entropy(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each row (``reduction="none"``)."""
    return nn.functional.cross_entropy(out, target, reduction="none")


def batch_of(widths: Sequence[int], batch: int, seed: int = 0) -> tuple[torch.Tensor,
                                                                         torch.Tensor]:
    """Random inputs and class targets for the MLP of ``widths`` (seeded)."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, widths[0], generator=gen),
            torch.randint(0, widths[-1], (batch,), generator=gen))


def mirrored_step(strategy: MirroredStrategy, model: nn.Module, x: torch.Tensor,
                  y: torch.Tensor, lr: float = 1e-3) -> Callable[[], Any]:
    """One training step of ``model`` (mirrored by ``strategy``) on the global batch
    ``x, y`` as a callable; the input is distributed once, outside the timed step."""
    mirrored = strategy.mirror(model)
    xs, ys = strategy.distribute_batch(x), strategy.distribute_batch(y)
    optimizer, global_batch = SGD(lr), x.size(0)

    def step() -> Any:
        return strategy.run(train_step, (mirrored, xs, ys, global_batch, optimizer,
                                         per_example_cross_entropy))

    return step


def measure_mirrored(build: Build, widths: Sequence[int], batch: int, replicas: int,
                     repeats: int = 5, cross_device_ops: str = "ring") -> Timing:
    """Step time of MirroredStrategy on ``replicas`` CPU devices of this process, s (one
    warm-up step; intra-op threads 1 while it runs)."""
    strategy = MirroredStrategy(["cpu"] * replicas, CROSS_DEVICE_OPS[cross_device_ops]())
    x, y = batch_of(widths, batch)
    step = mirrored_step(strategy, build(widths), x, y)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        step()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            step()
            samples.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return Timing.from_samples(samples)


def measure_multi_worker(build: Build, widths: Sequence[int], batch: int, repeats: int = 5,
                         implementation: str = "ring") -> dict[str, Any]:
    """Rank function: step time of MultiWorkerMirroredStrategy (``strategy``) and of our DDP
    on this worker's shard of the same global ``batch`` (``ddp``), repeats interleaved;
    every rank returns the same ``{name: Timing as dict}``."""
    import torch.distributed as dist

    from backends.ddp import DistributedDataParallel
    from backends.measure import measure_many
    from backends.tf_distribute.multi_worker import MultiWorkerMirroredStrategy

    strategy = MultiWorkerMirroredStrategy(implementation=implementation)
    x, y = batch_of(widths, batch)
    ours = mirrored_step(strategy, build(widths), x, y)
    ddp = DistributedDataParallel(build(widths))
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    shard_x, shard_y = (strategy.distribute_batch(t).values[0] for t in (x, y))

    def ddp_step() -> None:
        optimizer.zero_grad()
        nn.functional.cross_entropy(ddp(shard_x), shard_y).backward()  # type: ignore[no-untyped-call]
        optimizer.step()

    strategy_t, ddp_t = measure_many([ours, ddp_step], repeats=repeats, warmup=2, inner=1)
    dist.barrier()
    return {"strategy": strategy_t.as_dict(), "ddp": ddp_t.as_dict()}
