"""Scatter and gather: the binomial tables, the pieces' traffic, and the root's shared port."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.scatter_gather import (
    binomial_gather,
    binomial_scatter,
    linear_gather,
    linear_gather_cost,
    linear_scatter,
)
from simulator.core import Link, Topology, run_spmd
from tests.simulator.collective_helpers import cluster, fully_connected, sends_by_step


def test_binomial_scatter_follows_the_docstring_table():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), binomial_scatter, 4 * 400)
    assert sends_by_step(result) == [[("0->2", 800)], [("0->1", 400), ("2->3", 400)]]


def test_binomial_gather_is_the_same_tree_upwards():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), binomial_gather, 4 * 400)
    assert sends_by_step(result) == [[("1->0", 400), ("3->2", 400)], [("2->0", 800)]]


@pytest.mark.parametrize("program", [linear_scatter, linear_gather])
@given(p=st.integers(1, 9), count=st.integers(0, 1000), root=st.integers(0, 8))
def test_linear_moves_every_piece_but_the_roots_once(program, p, count, root):
    result = run_spmd(fully_connected(p), program, 4 * count, root % p, trace=False)
    own = 4 * (count // p + (1 if root % p < count % p else 0))
    assert result.total_bytes == 4 * count - own


@pytest.mark.parametrize("program", [binomial_scatter, binomial_gather])
@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_binomial_moves_half_the_buffer_per_level(program, p):
    n = 4 * p * 10
    result = run_spmd(fully_connected(p), program, n, trace=False)
    assert result.total_bytes == n // 2 * (p.bit_length() - 1)


def test_linear_gather_senders_overlap_until_the_roots_port_is_shared():
    p, n, alpha, bw = 8, 8 * 2**17, 1e-5, 1e9
    direct = run_spmd(fully_connected(p, alpha, bw, "fair"), linear_gather, n).makespan_s
    switch = run_spmd(cluster(Topology.switch(p, Link(alpha, bw, "fair"))), linear_gather,
                      n).makespan_s
    assert direct == pytest.approx(linear_gather_cost(p, n, alpha, 1 / bw))
    assert switch > direct
    assert switch == pytest.approx(alpha + (p - 1) * n / p / bw)  # the one-port β term


def test_scatter_over_a_switch_costs_what_it_costs_over_direct_links():
    # The root sends one piece at a time, so its port is never shared.
    link = Link(1e-5, 1e9, "fair")
    on_switch = run_spmd(cluster(Topology.switch(8, link)), linear_scatter, 2**20)
    direct = run_spmd(cluster(Topology.fully_connected(8, link)), linear_scatter, 2**20)
    assert on_switch.makespan_s == pytest.approx(direct.makespan_s)
