"""Broadcast: the step tables of the docstring, the chain's pipeline, traffic, and what the
closed forms miss on a ring of links."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.broadcast import (
    binomial_broadcast,
    linear_broadcast,
    pipelined_chain_broadcast,
    pipelined_chain_broadcast_cost,
    scatter_allgather_broadcast,
    segment_nbytes,
)
from simulator.core import Link, Topology, run_spmd
from tests.simulator.collective_helpers import cluster, fully_connected, send_names_by_step


def test_binomial_broadcast_follows_the_docstring_table():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), binomial_broadcast, 64)
    assert send_names_by_step(result) == [["0->2"], ["0->1", "2->3"]]


def test_binomial_broadcast_from_another_root_uses_relative_ranks():
    result = run_spmd(fully_connected(5, alpha=1.0, bw=1e15), binomial_broadcast, 64, src=3)
    # v = r - 3: v0=3 sends to v4=2, then v2=0, then v1=4; v2=0 sends to v3=1
    assert send_names_by_step(result) == [["3->2"], ["3->0"], ["0->1", "3->4"]]


def test_chain_pipelines_segments_as_in_the_docstring_table():
    # p = 4, three segments, one slot = α = 1 s per segment per link
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), pipelined_chain_broadcast,
                      12, segment_bytes=4)
    assert send_names_by_step(result) == [["0->1"], ["0->1", "1->2"], ["0->1", "1->2", "2->3"],
                                          ["1->2", "2->3"], ["2->3"]]
    assert result.makespan_s == pytest.approx(5.0)  # p - 2 + s slots


@given(p=st.integers(1, 9), segments=st.integers(1, 12), last=st.integers(1, 256),
       alpha=st.floats(0, 1e-4), src=st.integers(0, 8))
def test_chain_equals_its_closed_form_with_a_short_last_segment(p, segments, last, alpha, src):
    seg = 1024
    n = (segments - 1) * seg + 4 * last
    result = run_spmd(fully_connected(p, alpha), pipelined_chain_broadcast, n, src=src % p,
                      segment_bytes=seg, trace=False)
    expected = pipelined_chain_broadcast_cost(p, n, alpha, 1e-9, segment_bytes=seg)
    assert result.makespan_s == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_segments_are_whole_elements_and_an_empty_buffer_has_none():
    assert segment_nbytes(10 * 4 + 3, 16, 4) == [16, 16, 8]
    assert segment_nbytes(0, 16, 4) == []
    assert segment_nbytes(8, 2, 4) == [4, 4]  # a segment holds at least one element


@pytest.mark.parametrize("program", [linear_broadcast, binomial_broadcast,
                                     pipelined_chain_broadcast])
@given(p=st.integers(1, 9), count=st.integers(0, 5000))
def test_whole_buffer_broadcasts_move_p_minus_1_copies(program, p, count):
    result = run_spmd(fully_connected(p), program, 4 * count, trace=False)
    assert result.total_bytes == (p - 1) * 4 * count


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_scatter_allgather_moves_the_scatter_plus_p_minus_1_chunks_per_rank(p):
    n = 4 * p * 100
    result = run_spmd(fully_connected(p), scatter_allgather_broadcast, n)
    scatter = n // 2 * (p.bit_length() - 1)  # every level of the tree moves half the buffer
    assert result.total_bytes == scatter + (p - 1) * n


def test_scatter_allgather_beats_binomial_only_for_long_messages():
    def t(program, n):
        return run_spmd(fully_connected(16), program, n, trace=False).makespan_s

    assert t(scatter_allgather_broadcast, 1024) > t(binomial_broadcast, 1024)
    assert t(scatter_allgather_broadcast, 2**24) < t(binomial_broadcast, 2**24)


def test_binomial_tree_on_a_ring_of_links_pays_for_hops_the_formula_ignores():
    link = Link(1e-5, 1e9, "fair")
    on_ring = run_spmd(cluster(Topology.ring(8, link)), binomial_broadcast, 2**20)
    direct = run_spmd(cluster(Topology.fully_connected(8, link)), binomial_broadcast, 2**20)
    assert on_ring.makespan_s > direct.makespan_s


def test_chain_only_talks_to_neighbours_so_a_ring_of_links_costs_it_nothing():
    link = Link(1e-5, 1e9, "fair")
    on_ring = run_spmd(cluster(Topology.ring(8, link)), pipelined_chain_broadcast, 2**20)
    direct = run_spmd(cluster(Topology.fully_connected(8, link)), pipelined_chain_broadcast,
                      2**20)
    assert on_ring.makespan_s == pytest.approx(direct.makespan_s, rel=1e-12)
