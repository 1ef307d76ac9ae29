"""Grading exercise 13.1: messages of a split step, against simulator.rpc."""

import math

import pytest

from simulator.core import Cluster, Device, Link, Topology
from simulator.rpc import StageCost, message_count, simulate_split_step
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch13, pytest.mark.ex13_1]

TODO = ("message_count is not implemented yet: write it in exercises/ch13_messages.py "
        "(EXERCISE 13.1), then run `make grade EX=13.1` again")


def counts(k):
    return dict(call_or_fail("ch13_messages", "message_count", TODO, k))


def test_equal_to_the_simulators_count():
    for k in range(1, 65):
        assert counts(k) == message_count(k), f"k = {k}"


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_total_equals_the_simulated_steps_messages(k):
    link = Link(20e-6, 1.25e9, "none")
    cpu = Device("grading", flops_per_s=1e10, mem_bandwidth_Bps=1e10, memory_bytes=math.inf)
    cluster = Cluster.homogeneous("grading", cpu, Topology.fully_connected(k + 1, link))
    stages = [StageCost(1e-3, 2e-3, 1e-4, 4096, 4096)] * k
    trace = simulate_split_step(cluster, stages).trace
    sent = sum(1 for r in range(k + 1) for s in trace.for_rank(r) if s.kind == "send")
    assert counts(k)["total"] == sent
