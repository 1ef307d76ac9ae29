"""Grading exercise 4.3: the linear gather's time, against the simulator's closed form and
the simulated gather."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.scatter_gather import linear_gather, linear_gather_cost
from simulator.core import Cluster, Device, Link, Topology, run_spmd
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch04, pytest.mark.ex04_3]

TODO = ("gather_time is not implemented yet: write it in exercises/ch04_gather.py "
        "(EXERCISE 4.3), then run `make grade EX=4.3` again")


def gather(p, n, alpha, beta):
    return call_or_fail("ch04_gather", "gather_time", TODO, p, n, alpha, beta)


@given(p=st.integers(1, 256), n=st.integers(0, 2**30), alpha=st.floats(0, 1e-3),
       bandwidth=st.floats(1e6, 1e12))
def test_equal_to_the_simulators_closed_form(p, n, alpha, bandwidth):
    expected = linear_gather_cost(p, n, alpha, 1 / bandwidth)
    assert gather(p, n, alpha, 1 / bandwidth) == pytest.approx(expected, rel=1e-9, abs=0)


@pytest.mark.parametrize("p", [1, 2, 3, 4, 8])
def test_equal_to_the_simulated_gather(p):
    alpha, beta, n = 10e-6, 1 / 2e9, 4 * 1024 * 840  # divisible by every p: equal pieces
    link = Link(alpha, 1 / beta, "none")
    cpu = Device("grading", flops_per_s=1e10, mem_bandwidth_Bps=1e10, memory_bytes=math.inf)
    cluster = Cluster.homogeneous("grading", cpu, Topology.fully_connected(p, link))
    simulated = run_spmd(cluster, linear_gather, n).makespan_s
    got = gather(p, n, alpha, beta)
    assert got == pytest.approx(simulated, rel=1e-9, abs=1e-15), (
        f"p = {p}: you predict {got * 1e6:.3f} µs, the simulated gather takes "
        f"{simulated * 1e6:.3f} µs")
