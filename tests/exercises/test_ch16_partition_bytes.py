"""Grading exercise 16.3: the bytes each partition sends per step, and their α-β time.

Run with ``make grade EX=16.3`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex16_3
tests/exercises`` (the reference answer).
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends.tf_runtime.cluster import ClusterSpec
from backends.tf_runtime.graph import capture, place, prune
from backends.tf_runtime.measure import NodeCost
from backends.tf_runtime.partition import bytes_sent, partition
from lab.tf_runtime import sim_partitions
from simulator.tf_runtime import step_bytes
from tests.exercises.ch16_graphs import placed_graphs
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch16, pytest.mark.ex16_3]

TODO = ("bytes_per_task / transfer_time_s are not implemented yet: write them in "
        "exercises/ch16_partition_bytes.py (EXERCISE 16.3), then run `make grade EX=16.3` "
        "again")
MiB = 2**20


def call(function, *args):
    return call_or_fail("ch16_partition_bytes", function, TODO, *args)


@given(placed_graphs())
def test_bytes_per_task_equal_the_real_and_the_simulated_partitions(case):
    graph, cluster = case
    yours = list(call("bytes_per_task", graph, cluster))
    parts = partition(graph, cluster)
    free = {n.name: NodeCost(0.0, 0.0, 0.0) for n in graph.nodes}
    assert yours == bytes_sent(parts), "bytes_sent of the lab's partitions"
    assert yours == step_bytes(sim_partitions(parts, free)), "the simulated twin's step_bytes"


@given(placed_graphs(), st.floats(0, 1e-3), st.floats(1e-11, 1e-8))
def test_the_time_is_alpha_per_message_plus_beta_per_byte(case, alpha, beta):
    graph, cluster = case
    yours = call("transfer_time_s", graph, cluster, alpha, beta)
    parts = partition(graph, cluster)
    messages = sum(len(p.sends) + sum(r.needs_grad for r in p.recvs) for p in parts)
    expected = alpha * messages + beta * sum(bytes_sent(parts))
    assert yours == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.fixture(scope="module")
def mlp8():
    """The chapter's running example: 8 linear layers, ReLU between, activations of 512 KiB
    (here 512 wide, 256 rows), captured once."""
    torch.manual_seed(0)
    layers = []
    for i in range(8):
        layers += [torch.nn.Linear(512, 512)] + ([torch.nn.ReLU()] if i < 7 else [])
    return prune(capture(torch.nn.Sequential(*layers), torch.randn(256, 512)))


@pytest.mark.parametrize(("tasks", "mib", "ms"), [(1, 0, 0.0), (2, 1, 0.88), (4, 3, 2.64),
                                                  (8, 7, 6.15)])
def test_the_chapters_eight_layer_mlp(mlp8, tasks, mib, ms):
    cluster = ClusterSpec.local(tasks)
    graph = place(mlp8, cluster.device(0),
                  by_prefix={str(2 * i): cluster.device(i * tasks // 8) for i in range(8)})
    assert sum(call("bytes_per_task", graph, cluster)) == mib * MiB
    seconds = call("transfer_time_s", graph, cluster, 20e-6, 1 / 1.25e9)
    assert seconds * 1e3 == pytest.approx(ms, abs=0.005)
