"""The collectives' loopback model reproduces the ping-pong it is calibrated from."""

from dataclasses import replace

import pytest

from simulator.core import Cluster
from simulator.core.calibration import CalibrationEntry, fit_alpha_beta
from simulator.core.pingpong import latency_bound, one_way_s

SIZES = [2**k for k in range(10, 27, 2)]  # 1 KiB … 64 MiB


def measured(n: int) -> float:
    """A ping-pong that no straight line fits: 90 µs of latency, 4 GB/s for cached sizes,
    2.5 GB/s beyond 4 MiB."""
    return 9e-5 + min(n, 2**22) / 4e9 + max(n - 2**22, 0) / 2.5e9


def entry(**changes) -> CalibrationEntry:
    times = [measured(n) for n in SIZES]
    fit = fit_alpha_beta(SIZES, times)
    base = CalibrationEntry(
        host="h", backend="gloo", world_size=2, latency_s=fit.alpha_s,
        bandwidth_Bps=fit.bandwidth_Bps, reduce_Bps=1e10, memcpy_Bps=1e10, flops_per_s=1e11,
        bus_bandwidth_Bps=3e9, bus_latency_s=1e-4, p2p_sizes=SIZES, p2p_times_s=times,
        exchange_sizes=[2**20, 2**22, 2**24], exchange_times_s=[8e-4, 3e-3, 1.2e-2],
        chain_latency_s=[1e-4], chain_ahead_latency_s=[9e-5], ready_notice_s=3e-5,
        post_overhead_s=2.5e-5)
    return replace(base, **changes)


def test_the_simulated_ping_pong_takes_the_measured_time_at_every_size():
    model = Cluster.from_calibration(entry(), exchange_bus=True, receiver_driven=True)
    bound = latency_bound(SIZES, [measured(n) for n in SIZES], entry().bandwidth_Bps)
    assert any(bound) and not all(bound)
    for n, latency in zip(SIZES, bound, strict=True):
        # one α for all the latency-bound sizes (their median fits); a rate for each other
        assert one_way_s(model, n) == pytest.approx(measured(n), rel=0.05 if latency else 1e-3)


def test_without_the_solve_the_posting_and_the_notice_come_on_top_of_the_fitted_alpha():
    solved = Cluster.from_calibration(entry(), exchange_bus=True, receiver_driven=True)
    fitted = Cluster.from_calibration(entry(p2p_sizes=[], p2p_times_s=[]), exchange_bus=True,
                                      receiver_driven=True)
    # no ping-pong to solve from: the fitted α and B, and the small ping-pong pays the
    # posting and the notice besides α — slower than it was measured
    assert one_way_s(fitted, 2**10) > 1.2 * measured(2**10)
    assert one_way_s(solved, 2**10) == pytest.approx(measured(2**10), rel=0.05)
    # every other model keeps the fit: the ports have no rate table
    plain = Cluster.from_calibration(entry())
    assert not plain.topology.link((0, "bus_in")).bandwidth_by_load
