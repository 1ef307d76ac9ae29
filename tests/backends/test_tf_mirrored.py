"""The mirrored strategies' real twins: cross-device all-reduces, MirroredStrategy against
one-process training, distributed values, MultiWorkerMirroredStrategy against one process and
against our DDP."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from backends.tf_distribute import (
    SGD,
    HierarchicalCopyAllReduce,
    MirroredStrategy,
    PerReplica,
    ReduceOp,
    ReductionToOneDevice,
    RingAllReduce,
    VariableAggregation,
    train_step,
)
from backends.tf_distribute.cross_device_ops import CrossDeviceOps, pack, unpack
from backends.tf_distribute.values import in_cross_replica_context

OPS = [RingAllReduce(), ReductionToOneDevice(), HierarchicalCopyAllReduce(2),
       HierarchicalCopyAllReduce(3)]


@settings(max_examples=15, deadline=None)
@given(k=st.integers(1, 6), numel=st.integers(1, 40), which=st.integers(0, len(OPS) - 1),
       mean=st.booleans())
def test_every_cross_device_op_leaves_the_sum_in_every_buffer(k: int, numel: int, which: int,
                                                              mean: bool) -> None:
    gen = torch.Generator().manual_seed(k * 100 + numel)
    buffers = [torch.randn(numel, generator=gen) for _ in range(k)]
    expected = torch.stack(buffers).sum(0) / (k if mean else 1)
    OPS[which].all_reduce(ReduceOp.MEAN if mean else ReduceOp.SUM, buffers)
    for b in buffers:
        torch.testing.assert_close(b, expected, rtol=1e-5, atol=1e-5)


def test_batch_reduce_packs_and_unpacks_shapes_in_order_and_leaves_inputs() -> None:
    per_replica = [[torch.full((2, 3), float(i)), torch.full((4,), 10.0 * i)] for i in range(3)]
    before = copy.deepcopy(per_replica)
    out = RingAllReduce().batch_reduce(ReduceOp.SUM, per_replica, num_packs=4)
    for tensors in out:
        assert [t.shape for t in tensors] == [(2, 3), (4,)]
        torch.testing.assert_close(tensors[0], torch.full((2, 3), 3.0))
        torch.testing.assert_close(tensors[1], torch.full((4,), 30.0))
    for a, b in zip(per_replica, before, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert [t.shape for t in unpack(pack(per_replica[0]), per_replica[0])] == [(2, 3), (4,)]


def _net() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))


@pytest.mark.parametrize("op", [RingAllReduce(), ReductionToOneDevice(),
                                HierarchicalCopyAllReduce(2)], ids=lambda o: type(o).__name__)
@pytest.mark.parametrize(("replicas", "batch"), [(1, 5), (2, 6), (3, 7), (4, 5), (4, 2)])
def test_mirrored_training_matches_one_process(op: CrossDeviceOps, replicas: int,
                                               batch: int) -> None:
    """Several SGD steps on ``replicas`` devices end with the parameters one process gets on
    the whole batch — awkward batches too, where a replica may get no rows at all."""
    strategy = MirroredStrategy(["cpu"] * replicas, op)
    single = _net()
    mirrored = strategy.mirror(_net())
    optimizer = SGD(0.2)
    gen = torch.Generator().manual_seed(0)
    for _ in range(4):
        x, y = torch.randn(batch, 5, generator=gen), torch.randn(batch, 3, generator=gen)
        losses = strategy.run(train_step, (mirrored, strategy.distribute_batch(x),
                                           strategy.distribute_batch(y), batch, optimizer))
        loss = train_step(single, x, y, batch, optimizer)
        torch.testing.assert_close(strategy.reduce(ReduceOp.SUM, losses), loss)
    assert mirrored.in_sync()
    for ours, reference in zip(mirrored.primary().parameters(), single.parameters(),
                               strict=True):
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)


def test_run_gives_per_replica_values_and_reduce_combines_them() -> None:
    strategy = MirroredStrategy(["cpu"] * 3)
    batch = strategy.distribute_batch(torch.arange(7.0))
    assert [v.tolist() for v in batch.values] == [[0, 1, 2], [3, 4, 5], [6]]

    def fn(x: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        assert not in_cross_replica_context()
        return x.sum() * scale, torch.tensor(float(len(x)))

    sums, counts = strategy.run(fn, (batch, 2.0))
    assert isinstance(sums, PerReplica) and [float(v) for v in sums.values] == [6, 24, 12]
    assert float(strategy.reduce(ReduceOp.SUM, sums)) == 42
    assert float(strategy.reduce(ReduceOp.MEAN, counts)) == pytest.approx(7 / 3)
    assert float(strategy.reduce(ReduceOp.SUM, batch, axis=0)) == 21
    assert float(strategy.reduce(ReduceOp.MEAN, batch, axis=0)) == 3
    assert strategy.gather(batch).tolist() == list(range(7))


def test_replica_context_all_reduce_gives_every_replica_the_sum() -> None:
    from backends.tf_distribute.values import replica_context

    strategy = MirroredStrategy(["cpu"] * 4, ReductionToOneDevice())

    def fn() -> tuple[int, torch.Tensor]:
        ctx = replica_context()
        mine = torch.tensor([float(ctx.replica_id_in_sync_group)])
        return ctx.replica_id_in_sync_group, ctx.all_reduce(ReduceOp.SUM, [mine])[0]

    ids, sums = strategy.run(fn)
    assert list(ids.values) == [0, 1, 2, 3]
    assert [float(s) for s in sums.values] == [6.0] * 4


@pytest.mark.parametrize(("aggregation", "expected"), [(VariableAggregation.SUM, 4.0),
                                                       (VariableAggregation.MEAN, 4 / 3),
                                                       (VariableAggregation.ONLY_FIRST_REPLICA,
                                                        1.0)])
def test_sync_on_read_variable_is_written_per_replica_and_aggregated_on_read(
        aggregation: VariableAggregation, expected: float) -> None:
    strategy = MirroredStrategy(["cpu"] * 3)
    metric = strategy.sync_on_read(torch.zeros(()), aggregation)

    def fn(x: torch.Tensor) -> torch.Tensor:
        metric.assign_add(x.sum())
        return metric.read_value().clone()  # inside a replica: its own copy

    mine = strategy.run(fn, (strategy.distribute_batch(torch.tensor([1.0, 1.0, 2.0])),))
    assert [float(v) for v in mine.values] == [1.0, 1.0, 2.0]
    assert float(metric.read_value()) == pytest.approx(expected)  # outside: aggregated
    with pytest.raises(RuntimeError, match="per replica"):
        metric.assign_add(torch.ones(()))
    metric.reset()
    assert float(metric.read_value()) == 0.0


def test_mirrored_variable_assign_writes_every_copy() -> None:
    strategy = MirroredStrategy(["cpu"] * 3)
    weight = strategy.mirror(nn.Linear(2, 2)).variables[0]
    with torch.no_grad():
        weight.values[1].add_(1.0)
    assert not weight.in_sync()
    weight.assign(torch.ones(2, 2))
    assert weight.in_sync() and torch.equal(weight.read_value(), torch.ones(2, 2))


def test_a_failing_replica_raises_instead_of_hanging_the_others() -> None:
    strategy = MirroredStrategy(["cpu"] * 3)

    def fn(x: torch.Tensor) -> list[torch.Tensor]:
        from backends.tf_distribute.values import replica_context

        if len(x) == 1:
            raise ValueError("bad replica")
        return replica_context().all_reduce(ReduceOp.SUM, [x.sum()])

    with pytest.raises(RuntimeError, match=r"replica 2 .*bad replica"):
        strategy.run(fn, (strategy.distribute_batch(torch.arange(5.0)),))


# ---- multi-worker ----------------------------------------------------------------------------

def multi_worker_against_references(global_batch: int, steps: int) -> dict[str, float]:
    """Rank function: the same steps under MultiWorkerMirroredStrategy, one process on the
    whole batch, and our DDP on the same shards; the largest parameter differences."""
    import torch.distributed as dist

    from backends.ddp import DistributedDataParallel
    from backends.tf_distribute import MultiWorkerMirroredStrategy

    torch.manual_seed(dist.get_rank())  # every worker builds different weights…
    strategy = MultiWorkerMirroredStrategy()
    mirrored = strategy.mirror(nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)))
    single = copy.deepcopy(mirrored.primary())  # …and starts from the chief's
    ddp = DistributedDataParallel(copy.deepcopy(single))
    torch_sgd = torch.optim.SGD(ddp.parameters(), lr=0.2)
    optimizer = SGD(0.2)
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x, y = torch.randn(global_batch, 5, generator=gen), torch.randn(global_batch, 3,
                                                                        generator=gen)
        xs, ys = strategy.distribute_batch(x), strategy.distribute_batch(y)
        losses = strategy.run(train_step, (mirrored, xs, ys, global_batch, optimizer))
        total = strategy.reduce(ReduceOp.SUM, losses)
        assert torch.allclose(total, train_step(single, x, y, global_batch, optimizer))
        torch_sgd.zero_grad()
        nn.functional.mse_loss(ddp(xs.values[0]), ys.values[0]).backward()
        torch_sgd.step()
    ours = list(mirrored.primary().parameters())

    def gap(other: nn.Module) -> float:
        pairs = zip(ours, other.parameters(), strict=True)
        return max(float((a - b).detach().abs().max()) for a, b in pairs)

    return {"single": gap(single), "ddp": gap(ddp.module)}


def multi_worker_cases() -> list[dict[str, float]]:
    """Rank function: :func:`multi_worker_against_references` with equal shards (9 rows on 3
    workers) and awkward ones (7 rows: 3, 3, 1)."""
    return [multi_worker_against_references(9, 3), multi_worker_against_references(7, 3)]


def test_multi_worker_matches_one_process_and_our_ddp() -> None:
    """3 workers: the strategy's parameters equal one process's on the whole batch; with
    equal shards they equal our DDP's too (DDP averages the ranks' mean losses, which is the
    global mean only when every shard has as many rows)."""
    from backends.launch import spawn

    for even, awkward in spawn(multi_worker_cases, 3):
        assert even["single"] < 1e-5 and even["ddp"] < 1e-5
        assert awkward["single"] < 1e-5
        assert awkward["ddp"] > 1e-4  # the DDP recipe is not the global mean here
