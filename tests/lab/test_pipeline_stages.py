"""lab.pipeline's per-stage profile: the runtime's stages timed on one process, their bytes
from the per-layer profile, and the prediction built on them."""

import math
from dataclasses import replace

import pytest

from lab.pipeline import PipelineSetup, predict, profile, profile_stages, stage_profile
from simulator.core import Cluster, Device, Link, Topology
from simulator.pipeline.simulate import simulate_pipeline

TINY = PipelineSetup(layers=4, width=8, hidden=16, batch=8, stages=2, microbatches=4)


def free_cluster(p):
    return Cluster.homogeneous("t", Device("t", 1e12, 1e12, 1e12),
                               Topology.fully_connected(p, Link(0.0, 1e18, "none")))


@pytest.mark.parametrize("schedule, chunks", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)])
def test_every_virtual_stage_is_timed_in_its_schedule(schedule, chunks):
    setup = replace(TINY, schedule=schedule, chunks=chunks,
                    balance=(1,) * (TINY.stages * chunks) if chunks > 1 else (2, 2))
    stages = profile_stages(setup, repeats=2)
    assert len(stages) == setup.virtual_stages
    assert all(s.forward_s > 0 and s.backward_s > 0 for s in stages)


def test_stage_bytes_are_the_layers_and_the_prediction_uses_the_stage_times():
    setup = replace(TINY, balance=(3, 1))
    layers = profile(setup, repeats=2)
    timed = profile_stages(setup, repeats=2)
    stages = stage_profile(layers, (3, 1), timed)
    assert [s.activation_bytes for s in stages] == [
        sum(x.activation_bytes for x in layers[:3]), layers[3].activation_bytes]
    assert [s.parameter_bytes for s in stages] == [
        sum(x.parameter_bytes for x in layers[:3]), layers[3].parameter_bytes]
    assert stages[0].out_bytes == layers[2].out_bytes
    predicted = predict(setup, layers, cores=math.inf, cluster=free_cluster(2),
                        stage_times=timed)
    direct = simulate_pipeline(free_cluster(2), stages, [1, 1], setup.microbatches,
                               input_bytes=2 * 8 * 4)
    assert predicted.step_time_s == pytest.approx(direct.step_time_s)
    assert predicted.peak_activation_bytes == predict(
        setup, layers, cores=math.inf, cluster=free_cluster(2)).peak_activation_bytes


def test_a_stage_profile_needs_a_balance():
    with pytest.raises(ValueError, match="explicit balance"):
        profile_stages(TINY)
