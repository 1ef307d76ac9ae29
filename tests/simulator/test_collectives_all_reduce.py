"""All-reduce: traffic per rank, the tree tables, the tree-vs-ring crossover, the hierarchy on
two-level clusters, and the ring's fast path against the per-rank simulation."""


import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.all_reduce import (
    binary_tree_all_reduce,
    double_binary_tree_all_reduce,
    hierarchical_all_reduce,
    rabenseifner_all_reduce,
    recursive_doubling_all_reduce,
    reduce_broadcast_all_reduce,
    ring_all_reduce,
    ring_all_reduce_cost,
    ring_all_reduce_fast,
)
from simulator.core import Device, Link, Topology, run_spmd
from simulator.core.hardware import A100_80GB
from tests.simulator.collective_helpers import DEV, cluster, fully_connected, send_names_by_step

FREE_REDUCE = Device("free", flops_per_s=1e12, mem_bandwidth_Bps=9e18, memory_bytes=1e9)


def makespan(c, program, n, **kwargs):
    return run_spmd(c, program, n, trace=False, **kwargs).makespan_s


@given(p=st.integers(2, 12), pieces=st.integers(0, 50))
def test_ring_sends_the_traffic_lower_bound_on_each_link(p, pieces):
    n = 4 * p * pieces
    result = run_spmd(fully_connected(p), ring_all_reduce, n, trace=False)
    per_link = 2 * (p - 1) * n // p  # 2(p-1)/p·n out of every rank, all to its right neighbour
    assert result.bytes_per_channel == {(r, (r + 1) % p): per_link for r in range(p)}


def test_binary_tree_follows_the_docstring_table():
    c = fully_connected(8, alpha=1.0, bw=1e15, device=FREE_REDUCE)
    result = run_spmd(c, binary_tree_all_reduce, 64)
    assert send_names_by_step(result) == [
        ["1->2", "3->2", "5->6", "7->6"], ["2->4", "6->4"], ["4->0"],   # up
        ["0->4"], ["4->2", "4->6"], ["2->1", "2->3", "6->5", "6->7"]]   # down


def test_double_binary_tree_sends_each_half_along_its_own_tree():
    c = fully_connected(8, alpha=1.0, bw=1e15, device=FREE_REDUCE)
    n = 4 * 100
    result = run_spmd(c, double_binary_tree_all_reduce, n)
    sizes = {s.nbytes for s in result.trace if s.kind == "send"}
    assert sizes == {n // 2}
    # 2 trees × 2 directions × 7 edges
    assert sum(s.kind == "send" for s in result.trace) == 28


def test_recursive_doubling_swaps_with_r_xor_d():
    c = fully_connected(4, alpha=1.0, bw=1e15, device=FREE_REDUCE)
    result = run_spmd(c, recursive_doubling_all_reduce, 64)
    assert send_names_by_step(result) == [["0->1", "1->0", "2->3", "3->2"],
                                          ["0->2", "1->3", "2->0", "3->1"]]


@pytest.mark.parametrize("short", [binary_tree_all_reduce, recursive_doubling_all_reduce])
def test_trees_win_small_messages_and_the_ring_wins_large_ones(short):
    c = fully_connected(8, alpha=1e-5, bw=1e10)
    assert makespan(c, short, 1024) < makespan(c, ring_all_reduce, 1024)
    assert makespan(c, short, 2**26) > makespan(c, ring_all_reduce, 2**26)


def test_bandwidth_optimal_algorithms_beat_reduce_broadcast_on_large_messages():
    c = fully_connected(8, alpha=1e-5, bw=1e10)
    slow = makespan(c, reduce_broadcast_all_reduce, 2**24)
    for program in (ring_all_reduce, rabenseifner_all_reduce):
        assert makespan(c, program, 2**24) < slow


def test_unpipelined_double_tree_halves_the_single_trees_bandwidth_term_only():
    # Each tree carries n/2, but without NCCL's pipelining a tree is still lg p hops deep:
    # faster than one tree, not bandwidth-optimal like the ring.
    c = fully_connected(8, alpha=1e-5, bw=1e10, device=FREE_REDUCE)
    double = makespan(c, double_binary_tree_all_reduce, 2**24)
    assert double < makespan(c, binary_tree_all_reduce, 2**24)
    assert double > makespan(c, ring_all_reduce, 2**24)


def test_hierarchical_beats_the_flat_ring_when_inter_node_links_are_slow():
    nvlink, ethernet = Link(2e-6, 300e9, "fair"), Link(2e-5, 1.25e9, "fair")
    c = cluster(Topology.two_level(2, 8, nvlink, ethernet), A100_80GB)
    for n in (4096, 2**24):
        assert (makespan(c, hierarchical_all_reduce, n, ranks_per_node=8)
                < makespan(c, ring_all_reduce, n))


def test_hierarchical_loses_its_edge_when_reducing_is_slow():
    # The leaders' binomial reduce combines lg(m)·n bytes; on a device reducing at 3 GB/s
    # that costs more than the ring's (p-1)/p·n over the slow links saves.
    nvlink, ethernet = Link(2e-6, 300e9, "fair"), Link(2e-5, 1.25e9, "fair")
    c = cluster(Topology.two_level(2, 8, nvlink, ethernet), DEV)
    assert (makespan(c, hierarchical_all_reduce, 2**24, ranks_per_node=8)
            > makespan(c, ring_all_reduce, 2**24))


def test_hierarchical_with_one_rank_per_node_is_the_ring():
    c = fully_connected(5)
    assert makespan(c, hierarchical_all_reduce, 4000, ranks_per_node=1) == pytest.approx(
        makespan(c, ring_all_reduce, 4000))


def test_hierarchical_refuses_empty_nodes():
    with pytest.raises(ValueError, match="ranks_per_node"):
        run_spmd(fully_connected(4), hierarchical_all_reduce, 64, ranks_per_node=0)


FAIR = Link(1e-5, 1e9, "fair")
TOPOLOGIES = {
    "fully_connected/none": lambda p: Topology.fully_connected(p, Link(1e-5, 1e9, "none")),
    "switch/fair": lambda p: Topology.switch(p, FAIR),
    "ring/fair": lambda p: Topology.ring(p, FAIR),
    "two_level/fair": lambda p: Topology.two_level(p // 4, 4, Link(1e-6, 1e10, "fair"), FAIR),
}


@pytest.mark.parametrize("topology", sorted(TOPOLOGIES))
@pytest.mark.parametrize(("p", "extra"), [(4, 0), (8, 12), (12, 0), (12, 12), (64, 0)])
def test_fast_path_equals_the_per_rank_simulation(topology, p, extra):
    # extra = 12 bytes: three ranks get one element more, and the ranks drift out of step
    c = cluster(TOPOLOGIES[topology](p))
    n = 4 * p * 1000 + extra
    assert ring_all_reduce_fast(c, n) == pytest.approx(makespan(c, ring_all_reduce, n),
                                                       rel=1e-9)


@pytest.mark.parametrize(("p", "extra"), [(4, 0), (5, 12), (8, 4)])
def test_fast_path_prices_reductions_as_the_host_does(p, extra):
    # reductions read from a table by size (simulator.host.reduction), chunks of two sizes
    table = ((2048.0, 3e-5), (8192.0, 5e-5))
    c = cluster(Topology.switch(p, FAIR))
    c = c.with_host(reduce_s_by_bytes=table)
    n = 4 * p * 1000 + extra
    assert ring_all_reduce_fast(c, n) == pytest.approx(makespan(c, ring_all_reduce, n),
                                                       rel=1e-9)
    assert ring_all_reduce_fast(c, n) > ring_all_reduce_fast(cluster(Topology.switch(p, FAIR)),
                                                             n)


@given(p=st.integers(1, 9), count=st.integers(0, 40))
def test_fast_path_equals_the_per_rank_simulation_for_any_small_world(p, count):
    c = cluster(Topology.switch(p, FAIR))
    assert ring_all_reduce_fast(c, 4 * count) == pytest.approx(
        makespan(c, ring_all_reduce, 4 * count), rel=1e-9, abs=1e-15)


def test_fast_path_scales_to_a_thousand_ranks_and_keeps_the_closed_form():
    p, n = 1024, 4 * 1024 * 256
    c = cluster(Topology.switch(p, Link(1e-5, 1e9, "none")))
    expected = ring_all_reduce_cost(p, n, 1e-5, 1e-9, DEV.gamma_s_per_B)
    assert ring_all_reduce_fast(c, n) == pytest.approx(expected, rel=1e-9)
