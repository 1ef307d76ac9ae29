"""Grading exercise 16.1: a graph pruned to its fetches, as the lab's master does.

Run with ``make grade EX=16.1`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex16_1
tests/exercises`` (the reference answer).
"""

import pytest
import torch
from hypothesis import given

from backends.tf_runtime.cluster import ClusterSpec
from backends.tf_runtime.graph import GraphDef, prune
from backends.tf_runtime.partition import partition
from backends.tf_runtime.runtime import run_local
from tests.exercises.ch16_graphs import placed_graphs, skip_mlp
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch16, pytest.mark.ex16_1]

TODO = ("prune_names is not implemented yet: write it in exercises/ch16_prune.py "
        "(EXERCISE 16.1), then run `make grade EX=16.1` again")


def prune_names(graph, fetches):
    return call_or_fail("ch16_prune", "prune_names", TODO, graph, fetches)


@given(placed_graphs())
def test_random_graphs_keep_the_nodes_the_lab_keeps_in_graph_order(case):
    graph, _ = case
    expected = [n.name for n in prune(graph, graph.fetches).nodes]
    assert list(prune_names(graph, graph.fetches)) == expected, f"fetches {graph.fetches}"


def test_a_fetched_activation_runs_with_only_its_feed():
    graph, feeds, _ = skip_mlp(1)
    kept = list(prune_names(graph, ["relu"]))
    assert kept == ["x", "layers_0", "relu"], "the first layer's activation needs x only"
    pruned = GraphDef(tuple(n for n in graph.nodes if n.name in kept), ("relu",), graph.module)
    (part,) = partition(pruned, ClusterSpec.local(1))
    got = run_local([part], {"x": feeds["x"]})["relu"]  # no y fed
    with torch.no_grad():
        expected = torch.relu(graph.module.get_submodule("layers.0")(feeds["x"]))
    assert torch.allclose(got, expected)


def test_the_loss_needs_every_node():
    graph, _, _ = skip_mlp(2)
    assert list(prune_names(graph, graph.fetches)) == [n.name for n in graph.nodes]


def test_an_unknown_fetch_raises_key_error():
    graph, _, _ = skip_mlp(1)
    try:
        prune_names(graph, ["no_such_node"])
    except KeyError:
        return
    pytest.fail("prune_names(graph, ['no_such_node']) should raise KeyError", pytrace=False)
