"""The collectives' loopback model reproduces the chain of dependent exchanges it is built from."""

from dataclasses import replace

import pytest

from simulator.core import Cluster
from simulator.core.calibration import CHAIN_STEPS, CalibrationEntry
from simulator.host import cluster_from_entry
from simulator.host.cluster import chain_latencies
from simulator.host.wakeup import chain_means, chain_step_s


def entry(world: int = 4, ahead: bool = True) -> CalibrationEntry:
    """A loopback calibration whose chain steps grow with the ranks in it (4 ranks on 2
    cores: 0.3, 0.7, 1.7 ms plainly; 0.6, 0.7, 1.2 ms posted a step ahead)."""
    return CalibrationEntry(
        host="h", backend="gloo", world_size=world, latency_s=6e-5, bandwidth_Bps=4e9,
        reduce_Bps=1.2e10, memcpy_Bps=1.4e10, flops_per_s=1e11, bus_bandwidth_Bps=5e9,
        bus_latency_s=3e-4, exchange_sizes=[2**20, 2**22, 2**24],
        exchange_times_s=[1.3e-3, 3.9e-3, 12.6e-3],
        chain_latency_s=[3e-4, 7e-4, 1.7e-3][:world - 1],
        chain_ahead_latency_s=[6e-4, 7e-4, 1.2e-3][:world - 1] if ahead else [],
        ready_notice_s=1e-5, post_overhead_s=1.5e-5)


def collectives_model(cal: CalibrationEntry) -> Cluster:
    return cluster_from_entry(cal, exchange_bus=True, receiver_driven=True)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_the_sustained_chain_takes_the_measured_time_per_step(world):
    cal = entry(world)
    model = collectives_model(cal)
    for k, measured in enumerate(cal.chain_ahead_latency_s, start=2):
        assert chain_step_s(model, k, ahead=True) == pytest.approx(measured, rel=0.02)


def test_without_the_posted_ahead_chain_the_plain_one_prices_the_messages():
    cal = entry(4, ahead=False)
    model = collectives_model(cal)
    for k, measured in enumerate(cal.chain_latency_s, start=2):
        assert chain_step_s(model, k, ahead=False) == pytest.approx(measured, rel=0.02)


def test_messages_posted_together_no_longer_drift_apart():
    # counted in the order the simulation starts them, four messages posted at once pay
    # α, then one, two and three others' latencies: the ranks whose message came first run
    # ahead, and a long chain among four came out at well under half the measured step
    cal = entry(4)
    drifting = cluster_from_entry(cal, exchange_bus=True)  # the other chapters' model
    drifting = drifting.with_host(receiver_driven_sends=True,
                                  post_overhead_s=cal.post_overhead_s or 0.0)
    measured = cal.chain_latency_s[2]
    assert chain_step_s(drifting, 4, ahead=False) < 0.6 * measured
    assert chain_step_s(collectives_model(replace(cal, chain_ahead_latency_s=[])), 4,
                        ahead=False) == pytest.approx(measured, rel=0.02)


def test_the_table_is_scaled_down_by_what_a_step_costs_besides_its_wait():
    cal = entry(4)
    table = collectives_model(cal).topology.link(("bus_in", "bus_out")).host.busy_latency_by_flows
    measured = chain_latencies(cal, ahead=True)
    assert len(table) == len(measured)
    assert all(0 < t < m for t, m in zip(table, measured, strict=True))


def test_two_one_way_messages_pay_the_plain_two_rank_step():
    # the chain between two ranks is a swap; posted ahead (0.6 ms here) it is dearer than
    # plainly (0.3 ms); two messages one way each pay the plain one, scaled like the table
    bus = collectives_model(entry(4)).topology.link(("bus_in", "bus_out"))
    assert bus.host.one_way_pair_latency_s is not None
    assert 0 < bus.host.one_way_pair_latency_s < 3e-4 < bus.host.busy_latency_by_flows[0]
    plain_only = collectives_model(entry(4, ahead=False)).topology.link(("bus_in", "bus_out"))
    assert plain_only.host.one_way_pair_latency_s is None  # one chain: one price for any pair


def test_the_fixed_point_leaves_entries_beyond_the_cluster_as_measured():
    cal = entry(4)
    model = collectives_model(cal)

    def build(table):
        return replace(model, topology=replace(
            model.topology, links={key: (link.with_host(busy_latency_by_flows=tuple(table))
                                         if key == frozenset(("bus_in", "bus_out")) else link)
                                   for key, link in model.topology.links.items()}))

    means = chain_means(build, [5e-4, 9e-4, 1.5e-3, 4e-3])
    assert means[3] == 4e-3  # a chain among 5 ranks cannot run on 4
    assert chain_step_s(build(means), 3) == pytest.approx(9e-4, rel=0.02)
    assert CHAIN_STEPS >= 10
