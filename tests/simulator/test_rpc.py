"""The RPC split-model step: the simulation equals its closed form on an ideal network, and sends
the messages distributed autograd sends."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.rpc import StageCost, message_count, simulate_split_step, split_step_cost

stage = st.builds(StageCost, st.floats(0, 1e-2), st.floats(0, 1e-2), st.floats(0, 1e-3),
                  st.integers(0, 10**6), st.integers(0, 10**6))


def cluster(world, alpha=1e-4, bandwidth=1e9, contention="none"):
    return Cluster.homogeneous("ideal", Device("d", 1e12, 1e12, 1e12),
                               Topology.fully_connected(world, Link(alpha, bandwidth, contention)))


@settings(max_examples=40, deadline=None)
@given(stages=st.lists(stage, min_size=1, max_size=4), alpha=st.floats(1e-6, 1e-3),
       bandwidth=st.floats(1e8, 1e10), loss=st.floats(0, 1e-3))
def test_simulation_equals_the_closed_form(stages, alpha, bandwidth, loss):
    got = simulate_split_step(cluster(len(stages) + 1, alpha, bandwidth), stages, loss)
    want = split_step_cost(stages, alpha, 1 / bandwidth, loss)
    assert got.makespan_s == pytest.approx(want, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_message_count(k):
    stages = [StageCost(1e-3, 2e-3, 1e-4, 1000, 1000)] * k
    result = simulate_split_step(cluster(k + 1), stages)
    sends = [s for s in result.trace.spans if s.kind == "send"]
    assert len(sends) == message_count(k)["total"]


def test_the_world_must_fit_the_stages():
    with pytest.raises(ValueError, match="need 3 ranks"):
        simulate_split_step(cluster(2), [StageCost(0, 0, 0, 0, 0)] * 2)
