"""The tensor-parallel prediction's pieces (chapter 12), in one process: the profile of a rank's
step lists the collectives Megatron's layers issue, and the prediction replays it."""

import math

import pytest
import torch

from lab.tensor_parallel import GridPoint, compute_seconds, predict, profile_ops
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology


def _free(world: int) -> Cluster:
    cpu = Device("cpu", 1e11, 1e10, math.inf, reduce_Bps=math.inf, memcpy_Bps=math.inf)
    return Cluster.homogeneous("free", cpu, Topology.fully_connected(world, Link(0.0, 1e18,
                                                                              "none")))


def _slow(world: int, alpha: float) -> Cluster:
    cpu = Device("cpu", 1e11, 1e10, math.inf, reduce_Bps=math.inf, memcpy_Bps=math.inf)
    return Cluster.homogeneous("slow", cpu, Topology.fully_connected(world, Link(alpha, 1e18,
                                                                              "none")))


@pytest.fixture(scope="module", autouse=True)
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def kinds(ops):
    return [(k, g) for k, g, _ in ops if k != "compute"]


def test_profile_lists_megatrons_collectives():
    layers = 2
    plain = kinds(profile_ops(GridPoint(t=2, d=1), repeats=2, warmup=1))
    # forward: embedding g, 2 g per layer, 3 in the vocabulary-parallel loss;
    # backward: f of the output layer, 2 f per layer
    assert plain.count(("all_reduce", "tensor")) == 1 + 2 * layers + 3 + 1 + 2 * layers
    sp = kinds(profile_ops(GridPoint(t=2, d=1, sequence_parallel=True), repeats=2, warmup=1))
    assert sp.count(("reduce_scatter", "tensor")) == 1 + 2 * layers + 2 * layers + 1
    assert sp.count(("all_gather", "tensor")) == 2 * layers + 1 + 2 * layers + 1
    assert sp.count(("all_reduce", "tensor")) == 3 + 1  # the loss; the partial gradients
    data = kinds(profile_ops(GridPoint(t=1, d=2), repeats=2, warmup=1))
    assert data == [("all_reduce", "data")]


def test_prediction_is_compute_on_a_free_network_and_grows_with_latency():
    point = GridPoint(t=2, d=2)
    ops = profile_ops(point, repeats=2, warmup=1)
    free = predict(point, ops, _free(4))
    assert free == pytest.approx(compute_seconds(ops), rel=1e-9)
    assert predict(point, ops, _free(4), cores=2) == pytest.approx(2 * free, rel=1e-6)
    alpha = 1e-3
    slow = predict(point, ops, _slow(4, alpha))
    n = len(kinds(ops))
    assert slow > free + n * alpha  # every collective costs at least one α
    with pytest.raises(ValueError, match="ranks"):
        predict(point, ops, _free(2))


def test_waiting_cluster_takes_its_latency_from_the_waiting_primitive(tmp_path):
    from lab.tensor_parallel import WAIT_BYTES, waiting_cluster
    from simulator.core.calibration import CalibrationEntry, save_entry, this_host

    path = tmp_path / "calibration.json"
    save_entry(CalibrationEntry(host=this_host(), backend="gloo", world_size=2,
                                latency_s=5e-5, bandwidth_Bps=4e9, reduce_Bps=1.2e10,
                                memcpy_Bps=1.4e10, flops_per_s=1e11), path)
    exchange = 4e-4
    cluster, described = waiting_cluster(2, exchange, calibration=str(path))
    point = GridPoint(t=2, d=1)
    one = [("all_reduce", "tensor", 8.0)]
    # an 8-byte all-reduce of 2 ranks is two ring steps of gloo (one message each way)
    alpha = exchange - WAIT_BYTES / 4e9
    assert predict(point, one, cluster) == pytest.approx(2 * alpha, rel=0.02)
    assert "α = 399 µs" in described and "median: 50 µs" in described
    # no calibration: the free network, said so
    free, said = waiting_cluster(2, exchange, calibration=str(tmp_path / "none.json"))
    assert predict(point, one, free) < 1e-6 and "no calibration" in said


def test_pipeline_grid_prediction_is_1f1b_over_the_profiled_stages():
    from lab.tensor_parallel import profile_stages

    point = GridPoint(t=1, d=1, p=2, microbatches=4)
    stages = profile_stages(point, repeats=2, warmup=1)
    assert [s.activation_bytes for s in stages] == [4 * 16 * 2 * 32, 0]  # [s, b/m, h] float32
    assert ("all_reduce", "embedding", 4.0 * 64 * 32) in stages[0].finish
    assert ("all_reduce", "embedding", 4.0 * 64 * 32) in stages[1].finish
    free = predict(point, stages, _free(2))
    busiest = compute_seconds(stages, point.microbatches)
    f = max(compute_seconds(s.forward) for s in stages)
    b = max(compute_seconds(s.backward) for s in stages)
    finish = max(compute_seconds(s.finish) for s in stages)
    # 1F1B on a free network: at least the busiest stage's work; at most the schedule with
    # every stage as slow as the slowest, (m + p − 1)(f + b), and the slowest finish (the
    # stages differ: the first one's finish, its optimizer over the embedding, can be the
    # longest, and it starts only after the last backward has come back to it)
    upper = (point.microbatches + point.p - 1) * (f + b) + finish
    assert busiest <= free * (1 + 1e-9) <= upper * (1 + 1e-9)
    sp = profile_stages(GridPoint(t=2, d=1, p=2, microbatches=2, sequence_parallel=True),
                        repeats=2, warmup=1)
    assert sp[0].activation_bytes == 4 * 8 * 4 * 32  # the sequence shard crosses the boundary
    assert any(g == "tensor" for k, g, _ in sp[0].forward if k != "compute")
    with pytest.raises(ValueError, match="profile_stages"):
        profile_ops(point)


def test_conditions_wait_before_each_piece_and_take_the_slowest_copy():
    from lab.tensor_parallel import Conditions, StageProfile, sampler

    point = GridPoint(t=2, d=1)
    waits = []
    calls = iter([1.0, 2.0, 6.0] * 10)

    def slowest(pieces):  # stands in for the max over the copies: one value per run
        value = next(calls)
        return [value] * len(pieces)

    for statistic, want in (("median", 2.0), ("mean", 3.0)):
        calls = iter([1.0, 2.0, 6.0] * 10)
        waits.clear()
        ops = profile_ops(point, repeats=3, warmup=0,
                          conditions=Conditions(lambda: waits.append(1), slowest, statistic))
        pieces = [v for k, _, v in ops if k == "compute"]
        assert pieces == [want] * len(pieces)
        # one wait before each run and one inside each of its stand-in collectives
        assert len(waits) == 3 * (1 + len(kinds(ops)))
    timed = sampler(GridPoint(t=1, d=1, p=2, microbatches=2))
    for _ in range(3):
        timed.sample()
    stages = timed.result(skip=1)
    assert len(stages) == 2 and all(isinstance(s, StageProfile) for s in stages)
    with pytest.raises(ValueError, match="warm-up"):
        timed.result(skip=3)


def test_measure_rank_profiles_in_the_same_rounds():
    from backends.launch import spawn
    from lab.tensor_parallel import measure_rank, point_fields, profile_stages

    points = [GridPoint(t=2, d=1, sequence_parallel=True),
              GridPoint(t=1, d=1, p=2, microbatches=2)]
    got = spawn(measure_rank, 2, [point_fields(p) for p in points], 1, 1, 2,
                timeout=60)[0]
    plain, staged = got["profiles"]
    assert kinds(plain) == kinds(profile_ops(points[0], repeats=1, warmup=0))
    assert all(v > 0 for k, _, v in plain if k == "compute")
    alone = profile_stages(points[1], repeats=1, warmup=0)
    assert [kinds(s.forward) for s in staged] == [kinds(s.forward) for s in alone]
    assert [s.activation_bytes for s in staged] == [s.activation_bytes for s in alone]
    assert got["points"][0]["median_s"] > 0 and got["exchange_s"] >= 0
