"""The shaped network's simulated twin: rates as people type them, and the switch it builds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.collectives.point_to_point import ping_pong
from simulator.core.calibration import CalibrationEntry
from simulator.core.comm import run_spmd
from simulator.core.hardware import Cluster
from simulator.core.network import Link, LinkEffects
from simulator.core.shaped import (
    ack_fraction,
    network_key,
    parse_bandwidths,
    parse_rate,
    shaped_topology,
)
from simulator.host import cluster_from_entry, shaped_host_cluster

MiB = 2**20


def _entry(world: int, network: str, bus: float = 0.0) -> CalibrationEntry:
    return CalibrationEntry("h", "gloo", world, latency_s=100e-6, bandwidth_Bps=11.9e6,
                            reduce_Bps=2e9, memcpy_Bps=4e9, flops_per_s=1e10,
                            bus_bandwidth_Bps=bus, network=network)


@pytest.mark.parametrize(("text", "bps"), [("100mbit", 10**8), ("1gbit", 10**9),
                                           ("2.5gbit", 25 * 10**8), (" 10Gbit ", 10**10),
                                           ("125mbps", 10**9)])
def test_rates_in_tc_units(text, bps):
    assert parse_rate(text) == bps


@pytest.mark.parametrize("text", ["fast", "1gb", "", "-1gbit", "0mbit", "1tbit", "10kbit"])
def test_bad_rates_are_one_line_errors(text):
    with pytest.raises(ValueError) as err:
        parse_rate(text)
    assert "\n" not in str(err.value)


def test_one_rate_for_all_or_one_per_rank():
    assert parse_bandwidths("1gbit", 3) == [10**9] * 3
    assert parse_bandwidths("1gbit,1gbit,100mbit", 3) == [10**9, 10**9, 10**8]
    with pytest.raises(ValueError, match="2 bandwidths"):
        parse_bandwidths("1gbit,100mbit", 3)
    assert network_key("shaped", "1000mbit") == "shaped:1gbit"
    assert network_key("shaped", "1gbit,1gbit,100mbit") == "shaped:1gbit,1gbit,100mbit"
    assert network_key("loopback") == "loopback"


def test_shaped_cluster_prices_each_port_from_the_calibrated_efficiency():
    cluster = cluster_from_entry(_entry(3, "shaped:100mbit,100mbit,10mbit"))
    topo = cluster.topology
    assert topo.path_latency_s(0, 1) == pytest.approx(100e-6)
    assert topo.path_bandwidth_Bps(0, 1) == pytest.approx(11.9e6)
    assert topo.path_bandwidth_Bps(0, 2) == pytest.approx(1.19e6)  # η × 10 Mbit/s
    # a ping-pong on it is the calibrated α + n/B each way
    result = run_spmd(cluster, ping_pong, MiB)
    assert result.makespan_s == pytest.approx(2 * (100e-6 + MiB / 11.9e6), rel=1e-9)


def test_messages_into_one_rank_share_its_down_port():
    ports = [Link(0.0, 1e6)] * 3

    def two_into_one(comm, nbytes):
        if comm.rank == 0:
            yield from comm.recv(1, nbytes)
            yield from comm.recv(2, nbytes)  # both were sent at once: they shared the port
        else:
            yield from comm.send(0, nbytes)

    cluster = Cluster.homogeneous("t", cluster_from_entry(
        _entry(3, "shaped:100mbit")).devices[0], shaped_topology(ports))
    assert run_spmd(cluster, two_into_one, 10**6).makespan_s == pytest.approx(2.0)


def test_a_pair_carries_both_directions_at_once():
    def exchange(comm, nbytes):
        peer = 1 - comm.rank
        incoming = comm.irecv(peer, nbytes)
        outgoing = comm.isend(peer, nbytes)
        yield incoming.wait()
        yield outgoing.wait()

    device = cluster_from_entry(_entry(2, "shaped:100mbit")).devices[0]
    cluster = Cluster.homogeneous("t", device, shaped_topology([Link(0.0, 1e6)] * 2))
    assert run_spmd(cluster, exchange, 10**6).makespan_s == pytest.approx(1.0)


def test_messages_on_one_connection_cross_in_order():
    # one TCP connection per pair: the second message waits for the first (done at 1 s and
    # 2 s); fair sharing of the port would deliver both at 2 s
    done = {}

    def two_in_a_row(comm, nbytes):
        if comm.rank == 0:
            works = [comm.isend(1, nbytes, tag=t) for t in (0, 1)]
            for work in works:
                yield work.wait()
        else:
            for tag in (0, 1):
                yield from comm.recv(0, nbytes, tag=tag)
                done[tag] = comm.now

    device = cluster_from_entry(_entry(2, "shaped:100mbit")).devices[0]
    cluster = Cluster(  # sends wait for delivery, so the sender's works time them too
        "t", (device,) * 2, shaped_topology([Link(0.0, 1e6)] * 2))
    run_spmd(cluster, two_in_a_row, 10**6)
    assert done == pytest.approx({0: 1.0, 1: 2.0})


def test_ack_fraction_from_the_shift():
    assert ack_fraction(1e7, 3e7, 3) == pytest.approx(0.0)  # three ports, each at full rate
    assert ack_fraction(1.05e7, 4e7, 4) == pytest.approx(0.05)  # each port 5 % slower
    assert ack_fraction(1e7, 0.0, 2) == 0.0  # not measured
    assert ack_fraction(1e7, 1e8, 2) == 0.0  # faster than one direction: no negative load
    # one port at a quarter of the rate paces the shift: ε is measured against it
    assert ack_fraction(1e7, 4 * 0.25e7 / 1.05, 4, [4, 4, 4, 1]) == pytest.approx(0.05)


def _shift(comm, nbytes):
    incoming = comm.irecv((comm.rank - 1) % comm.world_size, nbytes)
    outgoing = comm.isend((comm.rank + 1) % comm.world_size, nbytes)
    yield incoming.wait()
    yield outgoing.wait()


def _one_way(comm, nbytes):
    if comm.rank == 0:
        yield from comm.send(1, nbytes)
    elif comm.rank == 1:
        yield from comm.recv(0, nbytes)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_a_port_that_sends_while_it_receives_carries_the_acknowledgements(world):
    device = cluster_from_entry(_entry(world, "shaped:100mbit")).devices[0]
    cluster = Cluster.homogeneous("t", device, shaped_topology(
        [Link(0.0, 1e6, host=LinkEffects(ack_fraction=0.05))] * world))
    assert run_spmd(cluster, _shift, 10**6).makespan_s == pytest.approx(1.05)  # B/(1+ε)
    assert run_spmd(cluster, _one_way, 10**6).makespan_s == pytest.approx(1.0)  # idle reverse


def test_the_calibrated_shift_is_predicted_back():
    # a calibration whose shift ran at 5 % below the ping-pong rate on every port
    entry = _entry(3, "shaped:100mbit", bus=3 * 11.9e6 / 1.05)
    shaped = cluster_from_entry(entry)
    n = 4 * MiB
    assert run_spmd(shaped, _shift, n).makespan_s == pytest.approx(
        100e-6 + 1.05 * n / 11.9e6, rel=1e-6)


def test_shaped_cluster_reads_its_own_calibration_entry(tmp_path):
    from simulator.core.calibration import find_entry, load_calibration, save_entry

    path = tmp_path / "cal.json"
    loop = CalibrationEntry("h", "gloo", 2, 1e-5, 1e9, 1e9, 1e9, 1e9)
    shaped = _entry(2, "shaped:100mbit")
    save_entry(loop, path)
    save_entry(shaped, path)
    assert sorted(load_calibration(path)) == ["h/gloo/2", "h/gloo/2/shaped:100mbit"]
    assert find_entry(2, host="h", path=path) == loop  # the loopback entry is untouched
    assert shaped_host_cluster(2, "100mbit", host="h", path=path).name == "shaped-100mbitx2"
    with pytest.raises(Exception, match="--network shaped --bandwidth 1gbit"):
        shaped_host_cluster(2, "1gbit", host="h", path=path)


def test_buffered_sends_let_the_root_feed_two_children_at_once():
    # gloo over TCP: a send returns once its bytes are in the socket buffer, so the binomial
    # root's two sends share its port (2T each), and rank 2 forwards to 3 after that: 3T
    from lab.twins import get_twin

    entry = _entry(4, "shaped:100mbit")
    shaped = cluster_from_entry(entry)
    assert shaped.host.buffered_sends
    n = 4 * MiB
    t = 100e-6 + n / 11.9e6
    assert get_twin("broadcast.binomial").simulate(shaped, n).makespan_s == pytest.approx(
        3 * t, rel=1e-3)
    delivered = Cluster(shaped.name, shaped.devices, shaped.topology)  # sends wait: 2T
    assert get_twin("broadcast.binomial").simulate(delivered, n).makespan_s == pytest.approx(
        2 * t, rel=1e-3)


def test_a_message_among_others_pays_the_busy_latency():
    ports = [Link(50e-6, 1e9)] * 4  # α = 100 µs on every path

    def two_pairs(comm, nbytes):
        if comm.rank in (0, 2):
            yield from comm.send(comm.rank + 1, nbytes)
        else:
            yield from comm.recv(comm.rank - 1, nbytes)

    device = cluster_from_entry(_entry(4, "shaped:100mbit")).devices[0]
    quiet = Cluster.homogeneous("t", device, shaped_topology(ports))
    busy = Cluster.homogeneous("t", device, shaped_topology(ports, busy_latency_s=2e-3))
    assert run_spmd(quiet, two_pairs, 0).makespan_s == pytest.approx(100e-6)
    assert run_spmd(busy, two_pairs, 0).makespan_s == pytest.approx(2e-3)  # the second one


def _root_feeds_two(comm, nbytes):
    """Rank 0 sends ``nbytes`` to rank 1, then to rank 2; returns when each send returned."""
    if comm.rank == 0:
        returned = []
        for dst in (1, 2):
            yield from comm.send(dst, nbytes)
            returned.append(comm.now)
        return returned
    yield from comm.recv(0, nbytes)
    return None


def test_a_send_returns_once_the_rest_fits_in_the_socket_buffer():
    # TCP: a blocking send returns when the unsent rest fits in the send buffer S, so the
    # root's second send starts after (n − S)/B, not after the whole message (S = 0, as
    # MPI's rendezvous) nor at once (S = None: all of it buffered)
    alpha, bw, n, s = 100e-6, 11.9e6, 4 * MiB, 2e6
    entry = _entry(3, "shaped:100mbit")
    with_buffer = cluster_from_entry(replace(entry, send_buffer_bytes=s))
    assert with_buffer.host.send_buffer_bytes == s
    got = run_spmd(with_buffer, _root_feeds_two, n)
    assert got.returns[0][0] == pytest.approx(alpha + (n - s) / bw, rel=1e-9)
    # rank 1's last S bytes share the root's port with rank 2's message from then on (after
    # its α): rank 1 is done at (n + S)/B, rank 2 when the port has carried both, α + 2n/B
    assert got.finish_s[1] == pytest.approx((n + s) / bw, rel=1e-9)
    assert got.finish_s[2] == pytest.approx(alpha + 2 * n / bw, rel=1e-9)
    # a message that fits returns at once
    assert run_spmd(with_buffer, _root_feeds_two, MiB).returns[0] == [0.0, 0.0]

    unmeasured = cluster_from_entry(entry)  # S = None: unchanged, sends return at once
    assert unmeasured.host.send_buffer_bytes is None
    got = run_spmd(unmeasured, _root_feeds_two, n)
    assert got.returns[0] == [0.0, 0.0]
    assert got.finish_s[1] == pytest.approx(alpha + 2 * n / bw, rel=1e-9)

    empty = cluster_from_entry(replace(entry, send_buffer_bytes=0.0))
    assert run_spmd(empty, _root_feeds_two, n).returns[0][0] == pytest.approx(
        alpha + n / bw, rel=1e-9)  # no buffer: a send returns on delivery


def test_binomial_broadcast_with_a_send_buffer_lies_between_its_bounds():
    from lab.twins import get_twin

    entry = _entry(4, "shaped:100mbit")
    n = 4 * MiB
    twin = get_twin("broadcast.binomial")
    times = [twin.simulate(cluster_from_entry(replace(entry, send_buffer_bytes=s)),
                           n).makespan_s for s in (0.0, 2e6, None)]
    t = 100e-6 + n / 11.9e6
    assert times[0] == pytest.approx(2 * t, rel=1e-3)  # sends wait for delivery
    assert times[2] == pytest.approx(3 * t, rel=1e-3)  # everything buffered
    assert times[0] < times[1] < times[2]


def test_send_buffer_from_the_send_return_primitive():
    from backends.primitives import send_buffer_bytes, send_buffer_probe_bytes

    assert send_buffer_bytes(8 * MiB, 0.5, 11.9e6) == pytest.approx(8 * MiB - 5.95e6)
    assert send_buffer_bytes(8 * MiB, 1.0, 11.9e6) == 0.0  # returned on delivery
    assert send_buffer_bytes(8 * MiB, 0.0, 11.9e6) == 8 * MiB  # returned at once
    assert send_buffer_probe_bytes([10**8] * 4) == 8 * MiB
    assert send_buffer_probe_bytes([10**9, 10**9]) == 64 * MiB
