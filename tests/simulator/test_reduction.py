"""A reduction among messages in flight: priced by size from the calibration's reducing shift."""

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core.calibration import SHIFT_AHEAD_STEPS, CalibrationEntry
from simulator.core.comm import run_spmd
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.host import cluster_from_entry
from simulator.host.reduction import monotone, reduce_ahead, reduce_ahead_s

SIZES = [2**16, 2**18, 2**20, 2**22, 2**24]
SHIFT = [1.2e-4, 2.0e-4, 6.0e-4, 4.0e-3, 1.6e-2]  # s per step, posted ahead


def entry(world: int, reducing: list[float]) -> CalibrationEntry:
    return CalibrationEntry(
        host="h", backend="gloo", world_size=world, latency_s=5e-5, bandwidth_Bps=2e10,
        reduce_Bps=1.2e10, memcpy_Bps=1.4e10, flops_per_s=1e11, bus_bandwidth_Bps=5e9,
        bus_latency_s=1e-4, exchange_sizes=SIZES, exchange_times_s=SHIFT,
        shift_ahead_times_s=SHIFT, reduce_ahead_times_s=reducing,
        chain_latency_s=[8e-5, 9e-5, 1e-4][:world - 1],
        chain_ahead_latency_s=[6e-5, 7e-5, 9e-5][:world - 1],
        ready_notice_s=0.0, post_overhead_s=1e-5)


def test_monotone_pools_the_sizes_measured_out_of_order():
    assert monotone([1.0, 3.0, 2.0, 4.0]) == [1.0, 2.5, 2.5, 4.0]
    assert monotone([5.0, 1.0, 0.0]) == [2.0, 2.0, 2.0]
    assert monotone([1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0]
    assert monotone([]) == []


@given(st.lists(st.floats(0, 1e3), max_size=12))
def test_monotone_is_non_decreasing_and_keeps_the_total(values):
    out = monotone(values)
    assert len(out) == len(values)
    assert all(a <= b * (1 + 1e-12) + 1e-12 for a, b in itertools.pairwise(out))
    assert sum(out) == pytest.approx(sum(values), rel=1e-9, abs=1e-9)


def test_a_cluster_reads_its_reductions_from_the_host_table_where_it_has_one():
    device = Device("d", 1e9, 3e9, 1e9, reduce_Bps=1e9)
    plain = Cluster.homogeneous("t", device, Topology.fully_connected(2, Link(0.0, 1e9)))
    assert plain.reduce_s(1, 2**20) == device.reduce_s(2**20) == pytest.approx(2**20 / 1e9)
    table = ((2**16, 4e-5), (2**18, 1e-4), (2**20, 4e-4))
    c = plain.with_host(reduce_s_by_bytes=table)
    assert c.reduce_s(0, 2**14) == 4e-5  # below the smallest: a cost per reduction
    assert c.reduce_s(1, 2**18) == pytest.approx(1e-4)
    assert c.reduce_s(0, 5 * 2**15) == pytest.approx(7e-5)  # halfway: linear in bytes
    assert c.reduce_s(1, 2**22) == pytest.approx(1.6e-3)  # beyond: in proportion to the bytes
    assert c.reduce_s(0, 0) == 0.0


def test_the_simulated_reducing_shift_is_the_calibrations_program():
    model = cluster_from_entry(entry(3, [t * 1.3 for t in SHIFT]), exchange_bus=True,
                                     receiver_driven=True)
    trace = run_spmd(model, reduce_ahead, 2**16).trace
    for rank in range(3):
        spans = [s for s in sorted(trace, key=lambda s: s.start) if s.rank == rank]
        kinds = [s.kind for s in spans if s.kind in ("send", "reduce")]
        # every step sends right and reduces what came from the left
        assert kinds.count("send") == kinds.count("reduce") == SHIFT_AHEAD_STEPS
        assert all(s.nbytes == 2**16 for s in spans if s.kind == "reduce")


@pytest.mark.parametrize("world", [2, 4])
def test_the_simulated_reducing_shift_takes_its_measured_time(world):
    # reductions among messages cost a fixed 40 µs and about four times γ·n besides
    reducing = [t + 4e-5 + 4 * n / 1.2e10 for n, t in zip(SIZES, SHIFT, strict=True)]
    model = cluster_from_entry(entry(world, reducing), exchange_bus=True,
                                     receiver_driven=True)
    table = model.host.reduce_s_by_bytes
    assert [n for n, _ in table] == SIZES
    times = [t for _, t in table]
    assert times == sorted(times)
    assert all(t >= n / 1.2e10 for n, t in table)  # never below alone
    for n, measured in zip(SIZES, reducing, strict=True):
        assert reduce_ahead_s(model, n) == pytest.approx(measured, rel=0.03)
    # a 16 KiB reduction costs what the smallest measured did, far more than γ·n
    assert model.reduce_s(0, 2**14) == times[0] > 3 * 2**14 / 1.2e10


def test_without_the_reducing_shift_reductions_are_gamma_n():
    cal = replace(entry(4, []), reduce_ahead_times_s=[])
    model = cluster_from_entry(cal, exchange_bus=True, receiver_driven=True)
    assert model.host.reduce_s_by_bytes == ()
    # every other chapter's model prices reductions by γ alone, measured or not
    plain = cluster_from_entry(entry(4, [2 * t for t in SHIFT]))
    assert plain.host is None
