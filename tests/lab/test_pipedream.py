"""lab.pipedream: the prediction side without processes, and clear errors."""

import pytest

from lab.pipedream import PipeDreamSetup, measure_pipedream, predict_pipedream
from simulator.core import Cluster, Device, Link, Topology
from simulator.pipeline import uniform_profile


def test_prediction_stashes_the_planned_versions_and_shares_the_cores():
    setup = PipeDreamSetup(balance=(1, 2, 1), minibatches=6)
    link = Link(0.0, 1e12, "none")
    cluster = Cluster.homogeneous("t", Device("t", 1e12, 1e12, 1e12),
                                  Topology.fully_connected(3, link))
    profile = uniform_profile(setup.layers, 1e-3, 2e-3)
    alone = predict_pipedream(setup, profile, cluster, cores=float("inf"))
    shared = predict_pipedream(setup, profile, cluster, cores=1)
    assert alone.weight_versions == [3, 2, 1]
    assert shared.step_time_s == pytest.approx(setup.minibatches * setup.layers * 3e-3)
    assert shared.step_time_s > alone.step_time_s


def test_one_stage_is_not_a_pipeline():
    with pytest.raises(ValueError, match="at least 2 stages"):
        measure_pipedream(PipeDreamSetup(balance=(4,)))
