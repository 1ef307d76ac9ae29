"""Reduce-scatter: the step tables, how much each rank sends and reduces, the fold, and
halving's long-distance messages on a ring of links."""

from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.reduce_scatter import (
    pairwise_reduce_scatter,
    recursive_halving_reduce_scatter,
    ring_reduce_scatter,
)
from simulator.core import Device, Link, Topology, run_spmd
from tests.simulator import collective_helpers as helpers
from tests.simulator.collective_helpers import per_rank, sends_by_step

DEV = Device("test", flops_per_s=1e12, mem_bandwidth_Bps=9e18, memory_bytes=1e9)  # reductions ~free
cluster = partial(helpers.cluster, device=DEV)
fully_connected = partial(helpers.fully_connected, device=DEV)


def test_recursive_halving_follows_the_docstring_table():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), recursive_halving_reduce_scatter,
                      4 * 400)
    assert sends_by_step(result) == [
        [("0->2", 800), ("1->3", 800), ("2->0", 800), ("3->1", 800)],
        [("0->1", 400), ("1->0", 400), ("2->3", 400), ("3->2", 400)]]


def test_pairwise_sends_each_piece_straight_to_its_owner():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), pairwise_reduce_scatter, 4 * 40)
    steps = [[name for name, _ in step] for step in sends_by_step(result)]
    assert steps == [["0->1", "1->2", "2->3", "3->0"], ["0->2", "1->3", "2->0", "3->1"],
                     ["0->3", "1->0", "2->1", "3->2"]]


@pytest.mark.parametrize("program", [ring_reduce_scatter, pairwise_reduce_scatter])
@given(p=st.integers(1, 9), pieces=st.integers(0, 100))
def test_each_rank_sends_and_reduces_p_minus_1_pieces(program, p, pieces):
    n = 4 * p * pieces
    result = run_spmd(fully_connected(p), program, n)
    assert per_rank(result, "send", p) == [n - n // p] * p
    assert per_rank(result, "reduce", p) == [n - n // p] * p


def test_recursive_halving_folds_a_non_power_of_two_world():
    n = 4 * 6 * 10  # p = 6: ranks 1 and 3 sit out
    result = run_spmd(fully_connected(6, alpha=1.0, bw=1e15), recursive_halving_reduce_scatter,
                      n)
    steps = sends_by_step(result)
    assert [s for s in steps[0] if s[0] in ("1->0", "3->2")] == [("1->0", n), ("3->2", n)]
    assert steps[-1] == [("0->1", 40), ("2->3", 40)]  # each even partner returns a piece


def test_halving_beats_the_ring_on_latency_but_not_on_a_ring_of_links():
    p, n = 8, 4 * 8 * 2**14
    link = Link(1e-6, 1e9, "fair")
    direct = cluster(Topology.fully_connected(p, link))
    ring = cluster(Topology.ring(p, link))

    def t(c, program):
        return run_spmd(c, program, n, trace=False).makespan_s

    assert t(direct, recursive_halving_reduce_scatter) < t(direct, ring_reduce_scatter)
    assert t(ring, recursive_halving_reduce_scatter) > t(ring, ring_reduce_scatter)
