"""The network model: α-β equality without contention, fair sharing, FIFO, routing."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology, run_spmd
from simulator.core.network import Contention, LinkEffects

DEV = Device("test", flops_per_s=1e12, mem_bandwidth_Bps=1e11, memory_bytes=1e9)


def cluster(topo: Topology) -> Cluster:
    return Cluster.homogeneous("test", DEV, topo)


def flows(pairs, sizes):
    """Rank program: start every (src, dst) flow at time 0; receivers wait for all."""

    def program(comm):
        todo = list(enumerate(zip(pairs, sizes, strict=True)))
        works = [comm.isend(d, n, tag=i) for i, ((s, d), n) in todo if s == comm.rank]
        recvs = [comm.irecv(s, n, tag=i) for i, ((s, d), n) in todo if d == comm.rank]
        for w in works + recvs:
            yield w.wait()
        return comm.now

    return program


def arrivals(topo, pairs, sizes):
    """Time each flow's bytes arrive (the receiving rank's span end), s."""
    result = run_spmd(cluster(topo), flows(pairs, sizes))
    recv = [s for s in result.trace if s.kind == "recv"]
    return sorted(s.end for s in recv), result


@given(alpha=st.floats(0, 1e-3), bw=st.floats(1e6, 1e12), n=st.integers(0, 2**30))
def test_uncontended_message_costs_alpha_plus_n_beta(alpha, bw, n):
    link = Link(alpha, bw, "none")
    times, _ = arrivals(Topology.fully_connected(2, link), [(0, 1)], [n])
    assert times[0] == pytest.approx(alpha + n / bw, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("builder", [Topology.switch, Topology.fully_connected])
def test_switch_path_costs_one_alpha(builder):
    link = Link(1e-5, 1e9, "none")
    times, _ = arrivals(builder(4, link), [(0, 3)], [10**6])
    assert times[0] == pytest.approx(1e-5 + 1e-3)


def test_fair_two_flows_on_one_link_each_take_twice_as_long():
    link = Link(0.0, 1e9, "fair")
    times, _ = arrivals(Topology.fully_connected(2, link), [(0, 1), (0, 1)], [10**9, 10**9])
    assert times == pytest.approx([2.0, 2.0])


def test_none_two_flows_on_one_link_do_not_interact():
    link = Link(0.0, 1e9, "none")
    times, _ = arrivals(Topology.fully_connected(2, link), [(0, 1), (0, 1)], [10**9, 10**9])
    assert times == pytest.approx([1.0, 1.0])


def test_fifo_flows_queue_one_after_another():
    link = Link(0.0, 1e9, "fifo")
    times, _ = arrivals(Topology.fully_connected(2, link), [(0, 1), (0, 1)], [10**9, 10**9])
    assert times == pytest.approx([1.0, 2.0])


def test_fair_rates_are_recomputed_when_a_flow_ends():
    # n and 3n share the link: both run at B/2 until 2n/B, then the big one runs alone.
    n, bw = 10**6, 1e6
    times, _ = arrivals(Topology.fully_connected(2, Link(0.0, bw, "fair")), [(0, 1), (0, 1)],
                        [n, 3 * n])
    assert times == pytest.approx([2.0, 4.0])


def test_full_duplex_directions_do_not_share():
    times, _ = arrivals(Topology.fully_connected(2, Link(0.0, 1e9, "fair")), [(0, 1), (1, 0)],
                        [10**9, 10**9])
    assert times == pytest.approx([1.0, 1.0])


def test_max_min_fairness_gives_a_capped_flows_share_to_the_other():
    # 0 -> 1 is capped at 2 B/s by an uncontended slow hop; 0 -> 2 takes the other 8 B/s.
    links = {frozenset((0, "s")): Link(0.0, 10.0, "fair"),
             frozenset((1, "s")): Link(0.0, 2.0, "none"),
             frozenset((2, "s")): Link(0.0, 10.0, "fair")}
    times, _ = arrivals(Topology(3, links), [(0, 1), (0, 2)], [16, 16])
    assert times == pytest.approx([2.0, 8.0])


def test_switch_port_is_shared_by_flows_into_one_rank():
    topo = Topology.switch(3, Link(0.0, 1e9, "fair"))
    times, _ = arrivals(topo, [(0, 2), (1, 2)], [10**9, 10**9])
    assert times == pytest.approx([2.0, 2.0])


def test_bytes_are_counted_on_every_hop():
    topo = Topology.switch(3, Link(0.0, 1e9, "none"))
    _, result = arrivals(topo, [(0, 2)], [1000])
    assert result.bytes_per_channel == {(0, "sw"): 1000, ("sw", 2): 1000}


def test_ring_routes_the_short_way_round():
    topo = Topology.ring(6, Link(1.0, 1e9))
    assert [c[1] for c in topo.route(0, 2)] == [1, 2]
    assert [c[1] for c in topo.route(0, 5)] == [5]
    assert topo.path_latency_s(0, 3) == 3.0


def test_two_level_keeps_intra_node_traffic_on_the_node_switch():
    topo = Topology.two_level(2, 4, Link(2e-6, 300e9), Link(5e-6, 25e9))
    assert topo.route(0, 3) == ((0, "node0"), ("node0", 3))
    assert topo.route(0, 5) == ((0, "fabric"), ("fabric", 5))
    assert topo.path_latency_s(0, 5) == pytest.approx(5e-6)
    assert topo.path_bandwidth_Bps(0, 3) == 300e9


def test_fat_tree_spreads_cross_leaf_traffic_over_spines():
    topo = Topology.fat_tree(8, 4, 2, Link(1e-6, 1e9), Link(1e-6, 2e9))
    assert len(topo.route(0, 1)) == 2
    assert len(topo.route(0, 4)) == 4
    spines = {topo.route(s, d)[1][1] for s in range(4) for d in range(4, 8)}
    assert spines == {"spine0", "spine1"}


@pytest.mark.parametrize("model", ["none", "fifo", "fair"])
def test_same_inputs_give_identical_results(model: Contention):
    topo = Topology.switch(4, Link(1e-6, 1e9, model))
    pairs = [(0, 1), (2, 1), (3, 0), (1, 3)]
    a = run_spmd(cluster(topo), flows(pairs, [7 * 10**5, 10**6, 3, 10**4]))
    b = run_spmd(cluster(topo), flows(pairs, [7 * 10**5, 10**6, 3, 10**4]))
    assert a.trace.spans == b.trace.spans and a.finish_s == b.finish_s


def test_bad_links_are_refused():
    with pytest.raises(ValueError, match="bandwidth"):
        Link(0.0, 0.0)
    with pytest.raises(ValueError, match="contention"):
        Link(0.0, 1.0, "lossy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="latency"):
        Link(-1.0, 1.0)
    assert math.isclose(Link(1e-6, 1e9).beta_s_per_B, 1e-9)


def test_with_contention_replaces_every_link():
    topo = Topology.switch(3, Link(0.0, 1.0, "fair")).with_contention("none")
    assert topo.contention == "none"


def test_shared_bus_makes_disjoint_pairs_compete():
    # 0->1 and 2->3 share nothing but the host's bus: each gets half of it.
    topo = Topology.shared_bus(4, Link(1e-5, 4e9, "fair"), bus_Bps=4e9)
    times, _ = arrivals(topo, [(0, 1), (2, 3)], [4 * 10**9, 4 * 10**9])
    assert times == pytest.approx([1e-5 + 2.0, 1e-5 + 2.0])
    alone, _ = arrivals(topo, [(0, 1)], [4 * 10**9])
    assert alone == pytest.approx([1e-5 + 1.0])
    assert topo.path_latency_s(3, 0) == pytest.approx(1e-5)


def test_a_connection_slows_a_swap_and_nothing_that_crosses_it_one_way():
    # a 10 GB/s bus; each pair's connection carries two messages at once at 2 GB/s in all
    topo = Topology.shared_bus(4, Link(0.0, 1e10, "fair"), bus_Bps=1e10,
                               connection_by_load=[(2e9, 2e9)])
    # a swap of 1 GB each way: both directions share the pair's one connection
    swap, _ = arrivals(topo, [(0, 1), (1, 0)], [10**9, 10**9])
    assert swap == pytest.approx([1.0, 1.0])
    # a ring of four, one message per connection, one way: only the bus limits them
    ring, _ = arrivals(topo, [(0, 1), (1, 2), (2, 3), (3, 0)], [10**9] * 4)
    assert ring == pytest.approx([0.4] * 4)
    alone, _ = arrivals(topo, [(2, 3)], [10**9])
    assert alone == pytest.approx([0.1])
    # without connections the swap is the bus's alone
    plain = Topology.shared_bus(4, Link(0.0, 1e10, "fair"), bus_Bps=1e10)
    assert arrivals(plain, [(0, 1), (1, 0)], [10**9, 10**9])[0] == pytest.approx([0.2, 0.2])
    # and a model without contention ignores them, as it ignores the bus's sharing
    free = topo.with_contention("none")
    assert arrivals(free, [(0, 1), (1, 0)], [10**9, 10**9])[0] == pytest.approx([0.1, 0.1])


def test_a_message_among_others_in_flight_pays_the_busy_latency():
    topo = Topology.shared_bus(4, Link(1e-5, 1e9, "fair"), bus_Bps=1e9, busy_latency_s=1e-3)
    # an exchange: the first message starts on an idle bus, the second while it is in flight
    times, _ = arrivals(topo, [(0, 1), (1, 0)], [0, 0])
    assert times == pytest.approx([1e-5, 1e-3])
    # one after another (a ping-pong) never sees a busy bus
    assert arrivals(topo, [(0, 1)], [2 * 10**6])[0] == pytest.approx([1e-5 + 2e-3])


def test_the_busy_latency_grows_with_the_messages_in_flight():
    # entry k-1: k others in flight (a chain among k+1 ranks); more than the table: the last
    topo = Topology.shared_bus(4, Link(1e-5, 1e9, "fair"), bus_Bps=1e9, busy_latency_s=1e-3,
                               busy_latency_by_flows=(1e-4, 5e-4))
    times, _ = arrivals(topo, [(0, 1), (1, 2), (2, 3), (3, 0)], [0, 0, 0, 0])
    assert times == pytest.approx([1e-5, 1e-4, 5e-4, 5e-4])
    # without a table every busy message pays busy_latency_s, however many are in flight
    flat = Topology.shared_bus(4, Link(1e-5, 1e9, "fair"), bus_Bps=1e9, busy_latency_s=1e-3)
    times, _ = arrivals(flat, [(0, 1), (1, 2), (2, 3)], [0, 0, 0])
    assert times == pytest.approx([1e-5, 1e-3, 1e-3])


def test_messages_that_start_together_can_count_one_another_whatever_the_order():
    # counted in order, the first of four simultaneous messages sees none in flight, the
    # last three; counting simultaneous starts, each sees the other three
    table = (1e-4, 5e-4, 9e-4)
    ordered = Topology.shared_bus(4, Link(1e-5, 1e9, "fair"), bus_Bps=1e9,
                                  busy_latency_s=1e-3, busy_latency_by_flows=table)
    together = Topology.shared_bus(4, Link(1e-5, 1e9, "fair"), bus_Bps=1e9,
                                   busy_latency_s=1e-3, busy_latency_by_flows=table,
                                   count_simultaneous=True)
    pairs = [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert arrivals(ordered, pairs, [0] * 4)[0] == pytest.approx([1e-5, 1e-4, 5e-4, 9e-4])
    assert arrivals(together, pairs, [0] * 4)[0] == pytest.approx([9e-4] * 4)
    # a message alone still pays the idle α, and one after another never sees a busy bus
    assert arrivals(together, [(0, 1)], [0])[0] == pytest.approx([1e-5])


def test_two_messages_one_way_each_can_pay_other_than_a_swap():
    topo = Topology.shared_bus(4, Link(1e-5, 1e9, "fair"), bus_Bps=1e9, busy_latency_s=1e-3,
                               busy_latency_by_flows=(8e-4, 9e-4), count_simultaneous=True,
                               one_way_pair_latency_s=3e-4)
    # a swap pays the table's first entry, two one-way messages the pair latency
    assert arrivals(topo, [(0, 1), (1, 0)], [0, 0])[0] == pytest.approx([8e-4, 8e-4])
    assert arrivals(topo, [(0, 1), (2, 3)], [0, 0])[0] == pytest.approx([3e-4, 3e-4])
    # three in flight: the table, whatever their directions
    assert arrivals(topo, [(0, 1), (2, 3), (1, 2)], [0] * 3)[0] == pytest.approx([9e-4] * 3)


def test_a_lone_message_moves_at_the_solo_rate_and_shared_ones_split_the_bus():
    # the loopback bus: one message alone at the ping-pong's 4 GB/s, two at once share 3 GB/s
    topo = Topology.shared_bus(4, Link(0.0, 4e9, "fair"), bus_Bps=3e9, solo_bus_Bps=4e9)
    alone, _ = arrivals(topo, [(0, 1)], [4 * 10**9])
    assert alone == pytest.approx([1.0])
    both, _ = arrivals(topo, [(0, 1), (1, 0)], [3 * 10**9, 3 * 10**9])
    assert both == pytest.approx([2.0, 2.0])
    # unequal messages: the short one ends after 2 s at 1.5 GB/s, the long one is alone then
    mixed, _ = arrivals(topo, [(0, 1), (1, 0)], [3 * 10**9, 7 * 10**9])
    assert mixed == pytest.approx([2.0, 2.0 + 4e9 / 4e9])
    with pytest.raises(ValueError, match="solo bandwidth"):
        LinkEffects(solo_bandwidth_Bps=0.0)


def test_a_rate_by_load_is_interpolated_log_linearly_and_flat_beyond_its_ends():
    host = LinkEffects(bandwidth_by_load=((2**20, 8e9), (2**24, 4e9)))
    assert host.rate_at_load(2**10) == 8e9 and host.rate_at_load(2**30) == 4e9
    assert host.rate_at_load(2**22) == pytest.approx(6e9)  # half way in log n
    for bad in (((2**24, 4e9), (2**20, 8e9)), ((2**20, 0.0),), ((0, 1e9),)):
        with pytest.raises(ValueError, match="bandwidth_by_load"):
            LinkEffects(bandwidth_by_load=bad)


def test_a_shared_bus_moves_small_messages_faster_than_large_ones_by_its_load():
    port = Link(0.0, 1e12)  # ports never limit: the bus decides
    topo = Topology.shared_bus(2, port, 1e9, bus_by_load=((2**21, 8e9), (2**25, 4e9)))
    # a swap of 1 MiB each way: 2 MiB on the bus at once, at 8 GB/s in all
    small, _ = arrivals(topo, [(0, 1), (1, 0)], [2**20, 2**20])
    assert small == pytest.approx([2**21 / 8e9] * 2)
    # of 16 MiB each way: 32 MiB at once, at 4 GB/s
    large, _ = arrivals(topo, [(0, 1), (1, 0)], [2**24, 2**24])
    assert large == pytest.approx([2**25 / 4e9] * 2)


def test_a_weighted_flow_takes_its_weight_of_every_fair_channel_it_crosses():
    import simpy

    from simulator.core.network import Network

    def run(weights, sizes):
        env = simpy.Environment()
        net = Network(env, Topology.fully_connected(2, Link(0.0, 1e9, "fair")))
        ends = []

        def one(n, w):
            yield from net.transfer(0, 1, n, weight=w)
            ends.append(env.now)

        for n, w in zip(sizes, weights, strict=True):
            env.process(one(n, w))
        env.run()
        return sorted(ends)

    assert run([2.0], [10**9]) == pytest.approx([1.0])  # alone on its link it weighs 1
    # with an unweighted flow: max-min gives both one rate r, r + 2r = 1 GB/s; the light one
    # has moved its GB at 3 s, and the heavy one's second GB then moves alone at 1 GB/s
    assert run([1.0, 2.0], [10**9, 2 * 10**9]) == pytest.approx([3.0, 3.0 + 1.0])


def test_a_lone_weighted_message_moves_at_the_solo_rate_of_a_bus_unweighted():
    import simpy

    from simulator.core.network import Network

    env = simpy.Environment()
    topo = Topology.shared_bus(2, Link(0.0, 4e9, "fair"), bus_Bps=1e9, solo_bus_Bps=4e9)
    net = Network(env, topo)
    env.process(net.transfer(0, 1, 4 * 10**9, weight=2.0))
    env.run()
    assert env.now == pytest.approx(1.0)  # alone: the solo 4 GB/s, its weight never counts
