"""ParameterServerStrategy and ClusterCoordinator on PyTorch processes (book ch. 19).

The pure parts (row blocks, partitioners, a ps task's once-only updates) run in this process;
the rest on one cluster of 2 workers and 2 ps tasks shared by the module, except the tests
that kill workers, which start their own.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends.tf_distribute import ps_measure as pm
from backends.tf_distribute.coordinator import ClosureError, ClusterCoordinator
from backends.tf_distribute.ps_channel import UnavailableError
from backends.tf_distribute.ps_measure import placement
from backends.tf_distribute.ps_strategy import (
    FixedShardsPartitioner,
    LocalCluster,
    MinSizePartitioner,
    ParameterServer,
    ParameterServerStrategy,
    row_blocks,
    shard_of_row,
)
from tests.backends.tf_ps_fns import fail, next_item, numbered, paused_step, stall, stall_on

# ---- pure parts -----------------------------------------------------------------------------


@given(st.integers(1, 200), st.integers(1, 12))
def test_row_blocks_cover_every_row_once_first_shards_longer(rows: int, shards: int) -> None:
    shards = min(shards, rows)
    blocks = row_blocks(rows, shards)
    assert blocks[0][0] == 0 and blocks[-1][1] == rows
    assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))
    sizes = [e - b for b, e in blocks]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] - sizes[-1] <= 1
    for row in range(rows):
        shard, local = shard_of_row(row, rows, shards)
        assert blocks[shard][0] + local == row and blocks[shard][0] <= row < blocks[shard][1]


def test_partitioners_choose_shard_counts() -> None:
    assert FixedShardsPartitioner(4)(rows=10, row_bytes=64) == 4
    assert FixedShardsPartitioner(4)(rows=3, row_bytes=64) == 3
    assert MinSizePartitioner(1024, max_shards=8)(rows=100, row_bytes=64) == 6  # 6400 B
    assert MinSizePartitioner(1024, max_shards=4)(rows=100, row_bytes=64) == 4
    assert MinSizePartitioner(1 << 20, max_shards=4)(rows=100, row_bytes=64) == 1


def test_ps_applies_each_closure_update_once() -> None:
    ps = ParameterServer()
    ps.handle(("create", "v", torch.zeros(3, 1)))
    assert ps.handle(("add", "v", torch.ones(3, 1), (7, 1))) is True
    assert ps.handle(("add", "v", torch.ones(3, 1), (7, 1))) is False  # the retry's repeat
    assert ps.handle(("add", "v", torch.ones(3, 1), (7, 2))) is True
    assert ps.handle(("add", "v", torch.ones(3, 1), None)) is True  # not from a closure
    assert ps.handle(("read", "v")).flatten().tolist() == [3.0, 3.0, 3.0]


# ---- on a cluster ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(num_workers=2, num_ps=2) as c:
        yield c


def test_sharded_variable_rows_live_on_round_robin_ps(cluster: LocalCluster) -> None:
    strategy = ParameterServerStrategy(cluster, FixedShardsPartitioner(3))
    value = torch.arange(30.0).view(10, 3)
    var = strategy.create_variable("table", value)
    assert placement(var) == [(0, 0, 4), (1, 4, 7), (0, 7, 10)]
    assert torch.equal(var.read_value(), value)
    ids = torch.tensor([[9, 0], [4, 4]])
    assert torch.equal(var.lookup(ids), value[ids])
    var.scatter_add(torch.tensor([4, 4, 9]), torch.ones(3, 3))
    expected = value.clone()
    expected[4] += 2
    expected[9] += 1
    assert torch.equal(var.read_value(), expected)
    with pytest.raises(IndexError, match="table has rows 0 … 9"):
        var.lookup(torch.tensor([10]))


def test_async_training_lowers_loss_every_closure_once(cluster: LocalCluster) -> None:
    strategy = pm.strategy_for(cluster)
    model = pm.create_model(strategy, closures=24)
    before = pm.evaluate(model.emb.read_value(), model.dense.read_value())
    with ClusterCoordinator(strategy) as coordinator:
        losses = pm.run_closures(coordinator, model, first=0, count=24)
        assert coordinator.done() and len(losses) == 24
        workers = {c.attempts[-1] for c in coordinator.closures}
        assert all(len(c.attempts) == 1 for c in coordinator.closures)
    after = pm.evaluate(model.emb.read_value(), model.dense.read_value())
    assert workers == {0, 1}
    assert torch.equal(model.ledger.read_value(), torch.ones(24, 1))
    assert after < before - 0.1


def test_closure_error_names_worker_and_join_raises_it(cluster: LocalCluster) -> None:
    with ClusterCoordinator(ParameterServerStrategy(cluster)) as coordinator:
        value = coordinator.schedule(fail, ("bad batch",))
        with pytest.raises(ClosureError, match=r"closure 0 \(fail\) failed on "
                                               r"/job:worker/replica:0/task:\d: ValueError"):
            coordinator.join(timeout_s=20)
        with pytest.raises(ClosureError, match="bad batch"):
            value.fetch()


def test_per_worker_dataset_iterates_on_each_worker(cluster: LocalCluster) -> None:
    with ClusterCoordinator(ParameterServerStrategy(cluster)) as coordinator:
        dataset = coordinator.create_per_worker_dataset(numbered)
        values = [coordinator.schedule(next_item, (dataset.iterator(),)) for _ in range(8)]
        coordinator.join(timeout_s=20)
        items = coordinator.fetch(values)
        ran_on = [c.attempts[-1] for c in coordinator.closures]
    assert [w for w, _ in items] == ran_on  # each took its own worker's iterator
    for w in set(ran_on):
        assert sorted(k for v, k in items if v == w) == list(range(ran_on.count(w)))


def _wait_running(coordinator: ClusterCoordinator, worker: int, timeout_s: float = 15) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker in coordinator.running:
            return coordinator.running[worker]
        time.sleep(0.005)
    raise AssertionError(f"worker {worker} never started a closure")


def test_killed_worker_closure_retried_elsewhere_exactly_once() -> None:
    closures = 10
    with LocalCluster(num_workers=2, num_ps=2) as cluster:
        strategy = pm.strategy_for(cluster)
        model = pm.create_model(strategy, closures)
        counter = strategy.create_variable("attempts_applied", torch.zeros(1, 1))
        with ClusterCoordinator(strategy) as coordinator:
            values = [coordinator.schedule(paused_step, (counter, model.emb, model.dense,
                                                         model.ledger, k, k, 0.1))
                      for k in range(closures)]
            victim = _wait_running(coordinator, worker=1)
            time.sleep(0.03)  # inside the pause: its counter update is already applied
            cluster.kill_worker(1)
            coordinator.join(timeout_s=30)
            losses = coordinator.fetch(values)
            attempts = {c.id: c.attempts for c in coordinator.closures}
            failures = list(coordinator.failures)
        assert attempts[victim] == [1, 0]  # run again, by the survivor
        assert len(losses) == closures
        assert torch.equal(model.ledger.read_value(), torch.ones(closures, 1))
        assert counter.read_value().item() == closures  # the dead attempt's update counted once
    assert len(failures) == 1
    assert "/job:worker/replica:0/task:1" in failures[0]
    assert f"closure {victim}" in failures[0] and "exit code -9" in failures[0]


def test_no_worker_left_fails_queued_closures_naming_workers() -> None:
    with LocalCluster(num_workers=1, num_ps=1) as cluster, \
            ClusterCoordinator(ParameterServerStrategy(cluster)) as coordinator:
        values = [coordinator.schedule(stall, (0.5,)) for _ in range(3)]
        _wait_running(coordinator, worker=0)
        cluster.kill_worker(0)
        with pytest.raises(UnavailableError, match=r"no worker left.*task:0 \(pid \d+\) died"):
            coordinator.join(timeout_s=20)
        assert all(v.done() for v in values)


def test_silent_worker_is_killed_and_its_closure_retried() -> None:
    with LocalCluster(num_workers=2, num_ps=1) as cluster, \
            ClusterCoordinator(ParameterServerStrategy(cluster),
                               closure_timeout_s=2.0) as coordinator:
        values = [coordinator.schedule(stall_on, (1, 60.0, 0.3)) for _ in range(6)]
        coordinator.join(timeout_s=20)
        assert coordinator.fetch(values) == [0] * 6
        assert any(c.attempts[0] == 1 and c.attempts[-1] == 0 for c in coordinator.closures)
        assert len(coordinator.failures) == 1
        assert "task:1" in coordinator.failures[0] and "silent past 2 s" in coordinator.failures[0]
        assert not cluster.workers[1].process.is_alive()
