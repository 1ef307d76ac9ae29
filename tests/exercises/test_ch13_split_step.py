"""Grading exercise 13.2: the split step's time, against simulator.rpc's closed form and its
simulated step."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology
from simulator.rpc import StageCost, simulate_split_step, split_step_cost
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch13, pytest.mark.ex13_2]

TODO = ("split_step_time is not implemented yet: write it in exercises/ch13_split_step.py "
        "(EXERCISE 13.2), then run `make grade EX=13.2` again")

STAGE = st.tuples(st.floats(0, 0.1), st.floats(0, 0.1), st.floats(0, 0.1),
                  st.integers(0, 2**24), st.integers(0, 2**24))


def step(stages, alpha, beta, loss):
    return call_or_fail("ch13_split_step", "split_step_time", TODO, stages, alpha, beta, loss)


@given(stages=st.lists(STAGE, min_size=1, max_size=8), alpha=st.floats(0, 1e-3),
       bandwidth=st.floats(1e6, 1e11), loss=st.floats(0, 0.01))
def test_equal_to_the_simulators_closed_form(stages, alpha, bandwidth, loss):
    expected = split_step_cost([StageCost(*s) for s in stages], alpha, 1 / bandwidth, loss)
    assert step(stages, alpha, 1 / bandwidth, loss) == pytest.approx(expected, rel=1e-9,
                                                                     abs=1e-15)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_equal_to_the_simulated_step(k):
    alpha, bandwidth = 20e-6, 1.25e9
    stages = [(1e-3 * (i + 1), 2e-3, 1e-4 * (k - i), 4096 * (i + 1), 8192) for i in range(k)]
    link = Link(alpha, bandwidth, "none")
    cpu = Device("grading", flops_per_s=1e10, mem_bandwidth_Bps=1e10, memory_bytes=math.inf)
    cluster = Cluster.homogeneous("grading", cpu, Topology.fully_connected(k + 1, link))
    simulated = simulate_split_step(cluster, [StageCost(*s) for s in stages], 5e-4).makespan_s
    got = step(stages, alpha, 1 / bandwidth, 5e-4)
    assert got == pytest.approx(simulated, rel=1e-9), (
        f"k = {k}: you {got * 1e3:.4f} ms, the simulated step {simulated * 1e3:.4f} ms")
