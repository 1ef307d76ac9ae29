"""Grading exercise 1.2: the binomial broadcast's time, against the simulator's closed form
and the simulated broadcast."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.broadcast import binomial_broadcast, binomial_broadcast_cost
from simulator.core import Cluster, Device, Link, Topology, run_spmd
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch01, pytest.mark.ex01_2]

TODO = ("binomial_broadcast_time is not implemented yet: write it in exercises/ch01_trees.py "
        "(EXERCISE 1.2), then run `make grade EX=1.2` again")


def tree_time(p, n, alpha, beta):
    return call_or_fail("ch01_trees", "binomial_broadcast_time", TODO, p, n, alpha, beta)


@given(p=st.integers(1, 300), n=st.integers(0, 2**30), alpha=st.floats(0, 1e-3),
       bandwidth=st.floats(1e6, 1e12))
def test_equal_to_the_simulators_closed_form(p, n, alpha, bandwidth):
    expected = binomial_broadcast_cost(p, n, alpha, 1 / bandwidth)
    assert tree_time(p, n, alpha, 1 / bandwidth) == pytest.approx(expected, rel=1e-9, abs=0)


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17])
def test_equal_to_the_simulated_broadcast(p):
    alpha, beta, n = 10e-6, 1 / 2e9, 4 * 2**20
    link = Link(alpha, 1 / beta, "none")
    cpu = Device("grading", flops_per_s=1e10, mem_bandwidth_Bps=1e10, memory_bytes=math.inf)
    cluster = Cluster.homogeneous("grading", cpu, Topology.fully_connected(p, link))
    simulated = run_spmd(cluster, binomial_broadcast, n).makespan_s
    got = tree_time(p, n, alpha, beta)
    assert got == pytest.approx(simulated, rel=1e-9), (
        f"p = {p}: you predict {got * 1e3:.4f} ms, the simulated broadcast takes "
        f"{simulated * 1e3:.4f} ms")
