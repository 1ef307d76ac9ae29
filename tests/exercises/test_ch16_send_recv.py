"""Grading exercise 16.2: the Send/Recv pairs of a placed graph, as the lab's partitioner
inserts them.

Run with ``make grade EX=16.2`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex16_2
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.tf_runtime.cluster import DeviceName
from backends.tf_runtime.partition import cut_edges, partition
from tests.exercises.ch16_graphs import placed_graphs, skip_mlp
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch16, pytest.mark.ex16_2]

TODO = ("send_recv_pairs is not implemented yet: write it in exercises/ch16_send_recv.py "
        "(EXERCISE 16.2), then run `make grade EX=16.2` again")


def pairs_of(graph, cluster, incarnation=1):
    return [tuple(p) for p in call_or_fail("ch16_send_recv", "send_recv_pairs", TODO, graph,
                                           cluster, incarnation)]


def labs_pairs(graph, cluster, incarnation):
    """The Send ops of the lab's partitions, in pair order (their tags)."""
    parts = partition(graph, cluster, {str(cluster.device(r)): incarnation
                                       for r in range(cluster.world_size)})
    sends = sorted((s.tag, s.tensor, p.rank, s.peer, s.key) for p in parts for s in p.sends)
    return [s[1:] for s in sends]


def check(graph, cluster, incarnation):
    yours = pairs_of(graph, cluster, incarnation)
    assert yours == labs_pairs(graph, cluster, incarnation)
    tasks = [(t, DeviceName.parse(str(cluster.device(d))).task_name) for t, _, d, _ in yours]
    assert tasks == cut_edges(graph)


@given(placed_graphs(), st.integers(1, 2**40))
def test_random_placements_get_the_partitioners_pairs(case, incarnation):
    graph, cluster = case
    check(graph, cluster, incarnation)


@pytest.mark.parametrize("tasks", [1, 2, 3, 4])
def test_the_chapters_model_over_tasks(tasks):
    graph, _, cluster = skip_mlp(tasks)
    check(graph, cluster, 1)
    pairs = pairs_of(graph, cluster)
    # a contiguous split: one activation per cut, and two more tensors to the last task: the
    # skip connection's relu (which no cut carries there) and the target y
    expected = tasks - 1 + 2 if tasks > 1 else 0
    assert len(pairs) == expected, pairs
