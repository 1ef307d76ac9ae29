"""The collectives' loopback bus reproduces the concurrent exchanges it is calibrated from."""

from dataclasses import replace

import pytest

from simulator.core.calibration import CalibrationEntry
from simulator.host import cluster_from_entry
from simulator.host.bus import bus_rates, exchange_s, shift_ahead

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
    model = cluster_from_entry(cal, exchange_bus=True, receiver_driven=True)
    bus = model.topology.link(("bus_in", "bus_out"))
    loads = [load for load, _ in bus.host.bandwidth_by_load]
    flows = 2 * (world // 2)
    assert loads == sorted(loads) and set(loads) <= {flows * n for n in SIZES}
    for n, measured in zip(SIZES, times, strict=True):
        if flows * n in loads:
            assert exchange_s(model, n) == pytest.approx(measured, rel=0.03)
    # its waits aside, the 1 MiB exchange moves its bytes twice as fast as the 16 MiB one
    rates = dict(bus.host.bandwidth_by_load)
    assert rates[flows * 2**20] > 1.8 * rates[flows * 2**24]


@pytest.mark.parametrize("world", [2, 4])
def test_the_bus_is_solved_from_the_shift_posted_ahead_where_it_was_measured(world):
    times = [1.2e-4, 2.0e-4, 6.0e-4, 4.0e-3, 1.6e-2]  # s, one exchange (one step) each
    plain = replace(entry(world, times), ready_notice_s=5e-5)  # a notice priced at 50 µs
    ahead = replace(plain, shift_ahead_times_s=times)  # the same times, round the ring
    by_plain, by_ahead = (cluster_from_entry(c, exchange_bus=True, receiver_driven=True)
                          for c in (plain, ahead))
    rates = {}
    for name, model in (("plain", by_plain), ("ahead", by_ahead)):
        rates[name] = dict(model.topology.link(("bus_in", "bus_out")).host.bandwidth_by_load)
    flows = world  # at 2 and 4 ranks as many messages in flight as in the exchange
    for n, measured in zip(SIZES, times, strict=True):
        if flows * n in rates["ahead"]:  # the solve reproduces the shift it was solved from
            assert exchange_s(by_ahead, n, ahead=True) == pytest.approx(measured, rel=0.03)
    # every send of the plain exchange waits for its partner's notice, so to take the same
    # time its bytes must have moved faster; posted ahead, only a call's first send waits
    shared = set(rates["plain"]) & set(rates["ahead"])
    assert shared and all(rates["ahead"][load] < rates["plain"][load] for load in shared)


def test_a_swap_slower_than_the_shift_prices_the_connection_and_leaves_the_ring_alone():
    from simulator.core.network import UNLIMITED_Bps, connection_channel

    shift = [1.2e-4, 2.0e-4, 6.0e-4, 4.0e-3, 1.6e-2]  # s per step, round the ring of four
    swap = shift[:2] + [1.3 * t for t in shift[2:]]  # swapped: slower from 1 MiB up
    cal = replace(entry(4, shift), shift_ahead_times_s=shift, swap_ahead_times_s=swap)
    model = cluster_from_entry(cal, exchange_bus=True, receiver_driven=True)
    rates = dict(model.topology.link(connection_channel(0, 1)).host.bandwidth_by_load)
    assert set(rates) == {2 * n for n in SIZES}
    # every size the connection limits, it limits to the swap's measured time; the three
    # that ran slower than the ring's steps are among them
    limited = [n for n in SIZES if rates[2 * n] < UNLIMITED_Bps]
    assert set(SIZES[2:]) <= set(limited)
    for n, measured in zip(SIZES, swap, strict=True):
        if n in limited:
            assert exchange_s(model, n, ahead=True, swap=True) == pytest.approx(measured,
                                                                               rel=0.02)
    # the slow-down is the connection's, not the bus's: slower per byte where it was 1.3 ×
    assert rates[2 * SIZES[-1]] < rates[2 * SIZES[0]]
    # the ring's steps never share a connection: the shift still takes its measured time
    bus = dict(model.topology.link(("bus_in", "bus_out")).host.bandwidth_by_load)
    for n, measured in zip(SIZES, shift, strict=True):
        if 4 * n in bus:
            assert exchange_s(model, n, ahead=True) == pytest.approx(measured, rel=0.03)
    # no swap measured (two ranks, or an older calibration): no connections at all
    bare = cluster_from_entry(replace(cal, swap_ahead_times_s=[]), exchange_bus=True,
                                    receiver_driven=True)
    assert frozenset(connection_channel(0, 1)) not in bare.topology.links


def test_the_simulated_shift_posted_ahead_is_the_calibrations_program():
    from simulator.core.calibration import SHIFT_AHEAD_STEPS
    from simulator.core.comm import run_spmd

    model = cluster_from_entry(entry(3, [1e-3] * 5), exchange_bus=True,
                                     receiver_driven=True)
    trace = run_spmd(model, shift_ahead, 2**16).trace
    sends = [s.name for s in trace if s.kind == "send"]
    # every rank sends right SHIFT_AHEAD_STEPS times, an odd world included
    assert sorted(sends) == sorted(["send 0->1", "send 1->2", "send 2->0"] * SHIFT_AHEAD_STEPS)


def test_an_exchange_that_is_all_waiting_fixes_no_rate():
    def build(table):
        return cluster_from_entry(entry(2, [1e-3] * 5), exchange_bus=False,
                                        receiver_driven=True)

    # 64 KiB in 10 µs is less than the cluster's own latency: no rate can explain it
    assert bus_rates(build, [2**16], [1e-5], flows=2) == ()


def test_other_models_keep_one_bus_rate():
    cal = entry(2, [1.2e-4, 2.0e-4, 6.0e-4, 4.0e-3, 1.6e-2])
    plain = cluster_from_entry(cal)  # every chapter but the collectives
    assert plain.topology.link(("bus_in", "bus_out")).host.bandwidth_by_load == ()


@pytest.mark.parametrize("world", [2, 4])
def test_queued_sends_weigh_what_makes_the_plain_exchange_take_its_measured_time(world):
    shift = [1.2e-4, 2.0e-4, 6.0e-4, 4.0e-3, 1.6e-2]  # s per step, posted ahead
    exchange = shift[:2] + [1.25 * t for t in shift[2:]]  # plain: slower from 1 MiB up
    cal = replace(entry(world, exchange), shift_ahead_times_s=shift)
    model = cluster_from_entry(cal, exchange_bus=True, receiver_driven=True)
    weights = dict(model.host.queued_weight_by_bytes)
    assert set(weights) == {float(n) for n in SIZES}
    assert all(weights[n] > 1.05 for n in SIZES[2:])  # every size that ran slower weighs
    bus = dict(model.topology.link(("bus_in", "bus_out")).host.bandwidth_by_load)
    for n, plain, ahead in zip(SIZES, exchange, shift, strict=True):
        if weights[n] > 1.0:  # the plain exchange, all of its sends queued, as measured
            assert exchange_s(model, n) == pytest.approx(plain, rel=0.03)
        if world * n in bus:  # and the shift it solved the bus from, first steps queued too
            assert exchange_s(model, n, ahead=True) == pytest.approx(ahead, rel=0.03)
    # a plain exchange no slower than the shift: nothing to weigh
    same = replace(cal, exchange_times_s=shift)
    assert cluster_from_entry(same, exchange_bus=True,
                                    receiver_driven=True).host.queued_weight_by_bytes == ()
    # eager sends (every other model) are never queued: no host effects on the sends at all
    assert cluster_from_entry(cal, exchange_bus=True).host is None
