"""The FSDP simulator (chapter 20): traffic per rank is ZeRO-3's 3Ψ (2Ψ without resharding
after forward), the bytes a rank keeps are (4 + 4 + K)·Ψ/N plus the flat gradient buffer, a
one-unit step's peak counts out by hand, prefetching hides all-gathers behind compute (and
holds one more unit), and a one-rank step is its compute alone."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.fsdp import (
    FsdpConfig,
    communication_volume,
    held_bytes,
    simulate_fsdp_step,
    traffic_bytes,
    update_peak_bytes,
)
from simulator.zero import UnitCost


def cluster(world, latency_s=0.0, bandwidth_Bps=1e18):
    return Cluster.homogeneous("c", Device("d", 1e12, 1e12, math.inf),
                               Topology.fully_connected(world, Link(latency_s, bandwidth_Bps)))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 16), st.lists(st.integers(1, 50), min_size=1, max_size=5),
       st.booleans())
def test_traffic_is_zero3_closed_form_when_units_divide(world, blocks, reshard):
    units = [UnitCost(b * world, 0.0, 0.0, 0.0) for b in blocks]
    params = sum(u.numel for u in units)
    got = traffic_bytes(units, world, FsdpConfig(reshard_after_forward=reshard))
    assert got == pytest.approx(communication_volume(params, world, reshard))
    assert got == pytest.approx((3 if reshard else 2) * (world - 1) / world * 4 * params)


def test_mixed_precision_gathers_in_param_dtype_and_reduces_in_reduce_dtype():
    units = [UnitCost(35, 0, 0, 0), UnitCost(18, 0, 0, 0)]  # padded to 36 and 18 at world 3
    got = traffic_bytes(units, 3, FsdpConfig(param_itemsize=2, reduce_itemsize=4))
    assert got == pytest.approx(2 / 3 * (36 + 18) * (2 * 2 + 4))


@given(st.integers(1, 8), st.lists(st.integers(1, 1000), min_size=1, max_size=4))
def test_held_bytes_are_sharded_model_states_and_the_flat_buffer(world, sizes):
    units = [UnitCost(n, 0, 0, 0) for n in sizes]
    shard = sum(-(-n // world) for n in sizes)
    flat = max(-(-n // world) * world for n in sizes) * 4
    assert held_bytes(units, world) == (4 + 4 + 8) * shard + flat


def test_one_unit_peak_counted_by_hand():
    # 10 parameters at world 2: shards of 5; kept: 5·(4 + 4 + 8) + the flat buffer 10·4 = 120;
    # backward holds the gathered unit (40) and its fresh gradients (40): 200.
    unit = UnitCost(10, 0.0, 0.0, 0.0)
    result = simulate_fsdp_step(cluster(2), [unit], trace=False)
    assert result.peak_memory_bytes == [200, 200]
    assert update_peak_bytes([unit], 2, FsdpConfig()) == 2 * 5 * 4


def test_prefetching_hides_gathers_and_holds_one_more_unit():
    units = [UnitCost(250_000, 1e-3, 2e-3, 0.0, 4096) for _ in range(4)]
    net = cluster(2, latency_s=1e-5, bandwidth_Bps=1e9)  # a 0.5 MB shard: 0.5 ms
    runs = {p: simulate_fsdp_step(net, units, FsdpConfig(prefetch=p), trace=False)
            for p in (False, True)}
    compute = sum(u.forward_s + u.backward_s for u in units)
    assert compute < runs[True].makespan_s < runs[False].makespan_s
    unit_bytes = 250_000 * 4
    extra = runs[True].peak_memory_bytes[0] - runs[False].peak_memory_bytes[0]
    assert 0 < extra <= unit_bytes


def test_keeping_units_after_forward_sends_less_and_holds_more():
    units = [UnitCost(1000, 1e-4, 1e-4, 0.0, 64) for _ in range(3)]
    keep, free = (FsdpConfig(reshard_after_forward=r) for r in (False, True))
    assert traffic_bytes(units, 4, keep) == pytest.approx(2 / 3 * traffic_bytes(units, 4, free))
    peaks = {c: simulate_fsdp_step(cluster(4), units, c, trace=False).peak_memory_bytes[0]
             for c in (keep, free)}
    assert peaks[keep] > peaks[free]


def test_one_rank_step_is_its_compute():
    units = [UnitCost(100, 1e-3, 2e-3, 4e-3), UnitCost(7, 5e-4, 1e-3, 1e-3)]
    result = simulate_fsdp_step(cluster(1), units, trace=False)
    assert result.makespan_s == pytest.approx(sum(u.forward_s + u.backward_s + u.update_s
                                                  for u in units))
