"""The ``tf.graph`` twin: the chapter's model is placed so that its skip connection crosses
tasks, the simulated twin sees exactly the real partitions' Sends and Recvs, and a prediction
row comes from the one-process profile."""

from pathlib import Path

import pytest

from backends.tf_runtime.measure import NodeCost
from backends.tf_runtime.partition import bytes_sent
from lab.strategies import get_strategy, prediction_rows
from lab.tf_runtime import SkipMLP, graph_spec, sim_partitions
from simulator.core.calibration import Calibration
from simulator.tf_runtime import check_pairs, compute_s, step_bytes


def test_the_twin_is_registered_for_chapters_15_and_16():
    twin = get_strategy("tf.graph")
    assert twin is not None and twin.chapter == "15-16" and twin.parameter == "batch"
    assert set(twin.quick_worlds) <= set(twin.worlds) and max(twin.worlds) <= 4


@pytest.mark.parametrize("tasks,skip_to", [(2, [1]), (3, [1, 2]), (4, [1, 3])])
def test_the_first_layer_output_goes_to_the_next_task_and_the_last(tasks, skip_to):
    parts = graph_spec(tasks, 8).partitions()
    assert sorted(s.peer for s in parts[0].sends if s.tensor == "relu") == skip_to
    assert parts[-1].fetches == ("mse_loss",)


@pytest.mark.parametrize("tasks", [2, 3])
def test_the_simulated_partitions_are_the_real_ones(tasks):
    spec = graph_spec(tasks, 6)
    parts = spec.partitions()
    graph, _ = spec.build()
    costs = {n.name: NodeCost(1e-3, 2e-3, 0.0) for n in graph.nodes}
    sim = sim_partitions(parts, costs)
    check_pairs(sim)
    assert step_bytes(sim) == bytes_sent(parts)
    nodes = [sum(1 for op in p.ops if op.kind == "node" and op.forward_s) for p in sim]
    assert compute_s(sim) == pytest.approx([3e-3 * n for n in nodes])


def test_a_prediction_without_calibration_is_the_compute_path(tmp_path: Path):
    twin = get_strategy("tf.graph")
    assert twin is not None
    empty = Calibration(tmp_path / "none.json", {})
    [row] = prediction_rows(twin, 2, [8], empty, ["host"])
    assert row["point"] == {"batch": 8} and row["tasks"] == 2
    assert row["predicted_s"] > 0 and row["bytes"] == sum(bytes_sent(
        graph_spec(2, 8).partitions()))


def test_bad_shapes_and_worlds_are_refused():
    with pytest.raises(ValueError, match="skip connection"):
        SkipMLP((4, 8, 6, 4))
    with pytest.raises(ValueError, match="tasks"):
        graph_spec(5, 8)
