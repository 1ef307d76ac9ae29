"""The simulated Horovod: fusion rule, the chapter's cycle model, the step, the launcher."""

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.ddp import Layer, Workload
from simulator.horovod import (
    HorovodCosts,
    HorovodSettings,
    Response,
    cycle_fixed_point,
    cycle_timeline,
    effective_threshold,
    fuse_responses,
    predict_startup,
    predict_step,
    ring_cost,
    uniform_cycle_timeline,
)

MiB = 2**20


# ---- fusion ------------------------------------------------------------------------------------

def test_fusion_packs_consecutive_tensors_up_to_the_threshold():
    sizes = [4 * MiB] * 4
    groups = fuse_responses([Response(str(i), n) for i, n in enumerate(sizes)], 10 * MiB)
    assert [[r.name for r in g] for g in groups] == [["0", "1"], ["2", "3"]]


def test_fusion_looks_ahead_past_another_dtype():
    rs = [Response("a", 4, "float32"), Response("b", 2, "float16"), Response("c", 4, "float32")]
    assert [[r.name for r in g] for g in fuse_responses(rs, 10)] == [["a", "c"], ["b"]]


def test_threshold_zero_is_one_all_reduce_per_tensor_and_a_big_tensor_goes_alone():
    rs = [Response(str(i), n) for i, n in enumerate([3, 1, 50, 2])]
    assert [len(g) for g in fuse_responses(rs, 0)] == [1, 1, 1, 1]
    assert [[r.name for r in g] for g in fuse_responses(rs, 10)] == [["0", "1"], ["2"], ["3"]]


@given(st.lists(st.tuples(st.integers(0, 100), st.sampled_from(["f32", "f16"])), max_size=30),
       st.integers(0, 250))
@settings(max_examples=200, deadline=None)
def test_fusion_keeps_every_tensor_once_and_respects_the_threshold(items, threshold):
    rs = [Response(str(i), n, d) for i, (n, d) in enumerate(items)]
    groups = fuse_responses(rs, threshold)
    assert sorted(int(r.name) for g in groups for r in g) == list(range(len(rs)))
    for g in groups:
        assert len({r.dtype for r in g}) == 1
        assert len(g) == 1 or sum(r.nbytes for r in g) <= threshold
        assert [int(r.name) for r in g] == sorted(int(r.name) for r in g)


def test_fusion_agrees_with_the_real_engine_on_seeded_random_inputs():
    real = pytest.importorskip("backends.horovod.fusion")
    rng = random.Random(7)
    for _ in range(300):
        items = [(str(i), rng.choice(["float32", "float16"]),
                  rng.choice([0, 4, 64, 4096, 2**20, 3 * 2**20]))
                 for i in range(rng.randint(0, 25))]
        threshold = rng.choice([0, 64, 4096, 2**20, 4 * 2**20, 64 * 2**20])
        ours = fuse_responses([Response(name, n, d) for name, d, n in items], threshold)
        assert [[r.name for r in g] for g in ours] == real.fuse_responses(items, threshold)
        assert effective_threshold(threshold, 4) == real.effective_threshold(threshold, 4)


# ---- the chapter's cycle model -----------------------------------------------------------------

def _resnet(c: float, threshold: float = 64 * MiB, backward_s: float = 0.2):
    a, bp = ring_cost(8, 30e-6, 0.8e-9)
    return uniform_cycle_timeline(102.4e6, backward_s, a, bp, c, 0.09e-3, threshold,
                                  pop_delay_s=0.09e-3)


@pytest.mark.parametrize(("c_ms", "cycles", "mb", "exposed_ms"), [
    (1, 114, 0.90, 1.9), (2, 101, 1.01, 1.9), (5, 41, 2.50, 4.0), (10, 21, 4.88, 7.6),
    (25, 9, 11.4, 18.4), (50, 5, 20.5, 36.3)])
def test_stepped_model_reproduces_the_chapters_cycle_time_table(c_ms, cycles, mb, exposed_ms):
    timeline = _resnet(c_ms * 1e-3)
    assert timeline.cycles == cycles and len(timeline.all_reduces) == cycles
    assert round(timeline.mean_fused_bytes / 1e6, 2 if mb < 10 else 1) == mb
    assert round(timeline.exposed_s * 1e3, 1) == exposed_ms


@pytest.mark.parametrize(("mib", "end_ms"), [(64, 146.7), (16, 148.3), (1, 186.5),
                                              (0.25, 309.1)])
def test_stepped_model_reproduces_the_chapters_threshold_figures(mib, end_ms):
    assert round(_resnet(1e-3, mib * MiB, 0.05).last_end_s * 1e3, 1) == end_ms


def test_busy_cycles_settle_at_the_closed_form_fixed_point():
    a, bp = ring_cost(8, 30e-6, 0.8e-9)
    length, fused = cycle_fixed_point(102.4e6, 0.2, a, bp, 0.09e-3)
    assert length == pytest.approx(1.80e-3, abs=0.01e-3) and fused == pytest.approx(0.92e6,
                                                                                   rel=0.01)
    timeline = uniform_cycle_timeline(102.4e6, 0.2, a, bp, 0.1e-3, 0.09e-3, 64 * MiB)
    middle = [s for s in timeline.cycle_starts_s if 0.05 < s < 0.15]
    steady = [b - a for a, b in itertools.pairwise(middle)]
    assert min(steady) == pytest.approx(length, rel=0.01)
    assert max(steady) == pytest.approx(length, rel=0.01)
    assert cycle_fixed_point(102.4e6, 0.05, a, bp) is None  # backward outruns the ring


# ---- the simulated step ------------------------------------------------------------------------

P, ALPHA, BETA, C0 = 4, 30e-6, 1e-9, 1e-4


def _free_cluster(p: int = P) -> Cluster:
    return Cluster.homogeneous("free", Device("d", 1e12, 1e11, 1e12),
                               Topology.fully_connected(p, Link(ALPHA, 1 / BETA, "none")))


def _uniform_workload(k: int = 200, nbytes: int = 100_000, backward_s: float = 0.0503):
    return Workload(tuple(Layer(f"l{i}", (nbytes,), 0.0, backward_s / k) for i in range(k)), 1)


def _ab_costs() -> HorovodCosts:
    a, bp = ring_cost(P, ALPHA, BETA)
    return HorovodCosts(lambda n: a + n * bp, C0)


@pytest.mark.parametrize("cycle_s", [1e-3, 5e-3, 20e-3])
@pytest.mark.parametrize("threshold", [0, MiB, 64 * MiB])
def test_contention_free_step_equals_the_stepped_cycle_model(cycle_s, threshold):
    workload, costs = _uniform_workload(), _ab_costs()
    prediction = predict_step(_free_cluster(), workload, HorovodSettings(threshold, cycle_s),
                              costs)
    per_layer = workload.layers[0].backward_s
    arrivals = [(t, 100_000) for t in itertools.accumulate([per_layer] * 200)]
    model = cycle_timeline(arrivals, cycle_s, C0, costs.all_reduce_s, threshold)
    assert prediction.step_s == model.last_end_s
    assert prediction.cycles == model.cycles
    assert prediction.fused_bytes == [n for *_, n in model.all_reduces]
    assert prediction.exposed_comm_s == pytest.approx(model.exposed_s, abs=1e-12)


def test_threshold_zero_reduces_each_tensor_alone_and_a_huge_cycle_fuses_everything():
    workload = _uniform_workload(20)
    cluster = _free_cluster()
    alone = predict_step(cluster, workload, HorovodSettings(0, 1e-3))
    assert alone.all_reduces == 20
    one = predict_step(cluster, workload, HorovodSettings(64 * MiB, 10.0))
    assert one.all_reduces == 1 and one.fused_bytes == [workload.param_bytes]


def test_step_time_grows_with_the_cycle_time_once_it_exceeds_backward():
    workload, cluster = _uniform_workload(50), _free_cluster()
    times = [predict_step(cluster, workload, HorovodSettings(64 * MiB, c)).step_s
             for c in (0.06, 0.1, 0.2)]
    assert times == sorted(times) and times[0] < times[-1]


def test_shared_cores_slow_the_step_and_the_simulation_is_deterministic():
    workload = Workload(tuple(Layer(f"fc{i}", (4 * MiB, 4096), 2e-3, 4e-3) for i in range(6)),
                        32)
    cluster = _free_cluster()
    first = predict_step(cluster, workload, HorovodSettings(8 * MiB, 2e-3), cores=2.0)
    again = predict_step(cluster, workload, HorovodSettings(8 * MiB, 2e-3), cores=2.0)
    free = predict_step(cluster, workload, HorovodSettings(8 * MiB, 2e-3))
    assert first.step_s == again.step_s and first.trace.spans == again.trace.spans
    assert first.step_s > free.step_s
    kinds = {s.kind for s in first.trace}
    assert {"compute", "wait", "WAIT", "NEGOTIATE", "MEMCPY_IN_FUSION_BUFFER", "ALLREDUCE",
            "MEMCPY_OUT_FUSION_BUFFER"} <= kinds


def test_the_engines_cycle_cpu_takes_cores_from_backward():
    workload = Workload(tuple(Layer(f"fc{i}", (4 * MiB, 4096), 2e-3, 4e-3) for i in range(6)),
                        32)
    cluster = _free_cluster()
    settings = HorovodSettings(8 * MiB, 1e-3)
    plain = HorovodCosts.on(cluster)
    busy = HorovodCosts.on(cluster, cycle_cpu_s=2e-4)
    free = predict_step(cluster, workload, settings, plain, cores=2.0)
    loaded = predict_step(cluster, workload, settings, busy, cores=2.0)
    assert loaded.backward_end_s > free.backward_end_s
    # on cores of their own the background threads' CPU only delays their own cycles
    alone = predict_step(cluster, workload, settings, busy)
    assert alone.backward_end_s == predict_step(cluster, workload, settings,
                                                plain).backward_end_s


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="threshold"):
        HorovodSettings(-1, 1e-3)
    with pytest.raises(ValueError, match="cycle time"):
        HorovodSettings(0, math.inf)
    with pytest.raises(ValueError, match="spin"):
        predict_step(_free_cluster(1), _uniform_workload(3), HorovodSettings(0, 0.0))


# ---- the launcher ------------------------------------------------------------------------------

def test_startup_shares_the_cores_and_waits_for_every_task():
    alone = predict_startup(1, 2.0, 1e-4)
    assert alone.ready_s == pytest.approx(2.0 + 4e-4)
    crowded = predict_startup(4, 2.0, 1e-4, cores=2)
    assert crowded.ready_s == pytest.approx(4.0 + 4e-4)
    assert crowded.registered_s == pytest.approx(4.0 + 1e-4)
    with pytest.raises(ValueError, match="at least 1"):
        predict_startup(0, 1.0, 1e-4)
