"""The collectives' loopback bus reproduces the concurrent exchanges it is calibrated from."""

import pytest

from simulator.core import Cluster
from simulator.core.bus import bus_rates, exchange_s
from simulator.core.calibration import CalibrationEntry

SIZES = [2**16, 2**18, 2**20, 2**22, 2**24]


def entry(world: int, times: list[float]) -> CalibrationEntry:
    return CalibrationEntry(
        host="h", backend="gloo", world_size=world, latency_s=5e-5, bandwidth_Bps=2e10,
        reduce_Bps=1.2e10, memcpy_Bps=1.4e10, flops_per_s=1e11, bus_bandwidth_Bps=5e9,
        bus_latency_s=1e-4, exchange_sizes=SIZES, exchange_times_s=times,
        chain_latency_s=[8e-5, 9e-5, 1e-4][:world - 1],
        chain_ahead_latency_s=[6e-5, 7e-5, 9e-5][:world - 1],
        ready_notice_s=0.0, post_overhead_s=1e-5)


@pytest.mark.parametrize("world", [2, 4])
def test_the_simulated_exchange_takes_the_measured_time_at_every_bandwidth_bound_size(world):
    # cache-resident exchanges run fast, memory-bound ones at about half the rate
    times = [1.2e-4, 2.0e-4, 6.0e-4, 4.0e-3, 1.6e-2]
    cal = entry(world, times)
    model = Cluster.from_calibration(cal, exchange_bus=True, receiver_driven=True)
    bus = model.topology.link(("bus_in", "bus_out"))
    loads = [load for load, _ in bus.bandwidth_by_load]
    flows = 2 * (world // 2)
    assert loads == sorted(loads) and set(loads) <= {flows * n for n in SIZES}
    for n, measured in zip(SIZES, times, strict=True):
        if flows * n in loads:
            assert exchange_s(model, n) == pytest.approx(measured, rel=0.03)
    # its waits aside, the 1 MiB exchange moves its bytes twice as fast as the 16 MiB one
    rates = dict(bus.bandwidth_by_load)
    assert rates[flows * 2**20] > 1.8 * rates[flows * 2**24]


def test_an_exchange_that_is_all_waiting_fixes_no_rate():
    def build(table):
        return Cluster.from_calibration(entry(2, [1e-3] * 5), exchange_bus=False,
                                        receiver_driven=True)

    # 64 KiB in 10 µs is less than the cluster's own latency: no rate can explain it
    assert bus_rates(build, [2**16], [1e-5], flows=2) == ()


def test_other_models_keep_one_bus_rate():
    cal = entry(2, [1.2e-4, 2.0e-4, 6.0e-4, 4.0e-3, 1.6e-2])
    plain = Cluster.from_calibration(cal)  # every chapter but the collectives
    assert plain.topology.link(("bus_in", "bus_out")).bandwidth_by_load == ()
