"""The mirrored strategies' simulated twins: the cross-device ops' costs in closed form, the
step's phases, and the multi-worker step's all-reduce on a textbook cluster."""

from __future__ import annotations

import math

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives.all_reduce import ring_all_reduce_cost
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.data_parallel import TableProfile
from simulator.tf_distribute import (
    CROSS_DEVICE_OPS,
    HostRates,
    replica_rows,
    simulate_mirrored,
    simulate_multi_worker,
)
from simulator.tf_distribute.mirrored import Host, groups_of

COPY_BPS, ADD_BPS = 2e9, 5e9
RATES = HostRates(COPY_BPS, ADD_BPS, cores=math.inf)
PROFILE = TableProfile((1, 10), (0.001, 0.010), (0.002, 0.020), (0.0, 0.0), step=0.003)


def _op_time(name: str, nbytes: int, k: int) -> float:
    env = simpy.Environment()
    env.process(CROSS_DEVICE_OPS[name](Host(env, RATES), nbytes, k))
    env.run()
    return float(env.now)


@settings(max_examples=20, deadline=None)
@given(k=st.integers(1, 8), elements=st.integers(1, 64))
def test_in_process_ring_copies_2_k_minus_1_buffers_and_adds_k_minus_1(k: int,
                                                                      elements: int) -> None:
    """Every replica sends ``2(k−1)/k`` of the buffer: ``k`` of them make ``2(k−1)·n`` bytes
    of copies and ``(k−1)·n`` of additions, one thread doing them all."""
    n = 4 * k * elements  # chunks of equal size
    assert _op_time("ring", n, k) == pytest.approx(2 * (k - 1) * n / COPY_BPS
                                                   + (k - 1) * n / ADD_BPS)


def test_reduction_to_one_device_moves_every_buffer_through_one_device() -> None:
    n, k = 4000, 4
    assert _op_time("one_device", n, k) == pytest.approx(2 * k * n / COPY_BPS
                                                         + (k - 1) * n / ADD_BPS)


def test_hierarchical_copy_reduces_in_groups_then_rings_the_leaders() -> None:
    n, k = 4000, 4  # two groups of two: one copy+add per group, a ring of 2, one copy back
    inside = 2 * (n / COPY_BPS + n / ADD_BPS) + 2 * n / COPY_BPS
    ring_of_leaders = 2 * n / COPY_BPS + n / ADD_BPS
    assert _op_time("hierarchical", n, k) == pytest.approx(inside + ring_of_leaders)
    assert groups_of(5, 2) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError):
        groups_of(4, 0)


def test_replica_rows_follow_torch_chunk_and_pad_with_empty_slices() -> None:
    assert replica_rows(7, 3) == [3, 3, 1]
    assert replica_rows(5, 4) == [2, 2, 1, 0]
    assert replica_rows(2, 4) == [1, 1, 0, 0]


def test_one_replica_step_is_compute_pack_and_update() -> None:
    step = simulate_mirrored(PROFILE, 4000, 10, 1, RATES)
    assert step.all_reduce_s == 0.0
    assert step.step_s == pytest.approx(0.010 + 0.020 + 4000 / COPY_BPS + 0.003)


def test_replicas_in_parallel_wait_for_the_largest_slice_then_the_all_reduce() -> None:
    step = simulate_mirrored(PROFILE, 4000, 10, 3, RATES)  # slices 4, 4, 2
    assert step.compute_s == pytest.approx(0.004 + 0.008 + 4000 / COPY_BPS)
    assert step.all_reduce_s == pytest.approx(_op_time("ring", 4000, 3))
    assert step.step_s == pytest.approx(step.compute_s + step.all_reduce_s + 0.003)


def test_shared_cores_and_a_measured_speed_slow_the_replica_threads() -> None:
    free = simulate_mirrored(PROFILE, 4000, 10, 2, RATES)
    one_core = simulate_mirrored(PROFILE, 4000, 10, 2, HostRates(COPY_BPS, ADD_BPS, 1.0))
    half = simulate_mirrored(PROFILE, 4000, 10, 2, HostRates(COPY_BPS, ADD_BPS, 8.0, 0.5))
    assert one_core.compute_s == pytest.approx(2 * free.compute_s)
    assert half.compute_s == pytest.approx(2 * free.compute_s)
    assert half.all_reduce_s == pytest.approx(free.all_reduce_s)  # one thread: not slowed


@pytest.mark.parametrize("p", [2, 3, 4])
def test_multi_worker_all_reduce_is_the_ring_on_the_cluster(p: int) -> None:
    alpha, bandwidth, nbytes = 1e-4, 1e9, 4 * 1200
    device = Device("cpu", 1e9, 3 * ADD_BPS, math.inf, reduce_Bps=ADD_BPS,
                    memcpy_Bps=COPY_BPS)
    cluster = Cluster.homogeneous("t", device,
                                  Topology.fully_connected(p, Link(alpha, bandwidth, "none")))
    step = simulate_multi_worker(cluster, PROFILE, nbytes, 10 * p, math.inf)
    assert step.all_reduce_s == pytest.approx(
        ring_all_reduce_cost(p, nbytes, alpha, 1 / bandwidth, 1 / ADD_BPS))
    assert step.compute_s == pytest.approx(0.010 + 0.020 + nbytes / COPY_BPS)
    assert step.step_s == pytest.approx(step.compute_s + step.all_reduce_s + 0.003)
