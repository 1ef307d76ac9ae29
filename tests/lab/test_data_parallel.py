"""The DataParallel lab: primitives from one thread, the prediction built on them, the step."""

import pytest

from lab.data_parallel import (
    SMOKE_WIDTHS,
    compare,
    measure_primitives,
    measure_step,
    predict_step,
    workload,
)
from simulator.data_parallel import PHASES


def test_primitives_cover_every_chunk_the_replicas_get():
    prims = measure_primitives(SMOKE_WIDTHS, 10, (1, 3, 4), repeats=2)
    # chunks of 10 rows: 1 replica 10; 3 replicas 4,4,2; 4 replicas 3,3,3,1
    assert prims.profile.batches == (1, 2, 3, 4, 10)
    assert min(prims.memcpy_Bps, prims.reduce_Bps, prims.first_sum_Bps) > 0 and prims.cores >= 1
    assert all(t > 0 for t in prims.profile.forward + prims.profile.backward)


def test_prediction_is_the_simulated_twin_on_those_primitives():
    prims = measure_primitives(SMOKE_WIDTHS, 8, (1, 2, 4), repeats=2)
    one = predict_step(prims, SMOKE_WIDTHS, 8, 1).returns[0]
    two = predict_step(prims, SMOKE_WIDTHS, 8, 2).returns[0]
    assert one["replicate"] == one["reduce"] == 0.0  # one replica copies nothing
    param_bytes = workload(SMOKE_WIDTHS, 8).param_bytes
    assert two["replicate"] == pytest.approx(param_bytes / prims.memcpy_Bps)
    assert two["reduce"] == pytest.approx(param_bytes / prims.memcpy_Bps  # one copy, one sum
                                          + param_bytes / prims.first_sum_Bps)
    four = predict_step(prims, SMOKE_WIDTHS, 8, 4).returns[0]
    assert four["reduce"] == pytest.approx(  # the first sum into a new tensor, two in place
        3 * param_bytes / prims.memcpy_Bps + param_bytes / prims.first_sum_Bps
        + 2 * param_bytes / prims.reduce_Bps)
    assert two["backward"] == pytest.approx(  # the CPU autograd thread runs both, in turn
        2 * prims.profile.backward_s(4) + 4 * SMOKE_WIDTHS[-1] * 4 / prims.memcpy_Bps)


def test_measured_step_and_trace():
    timing, trace = measure_step(SMOKE_WIDTHS, 7, 3, repeats=2, trace=True)
    assert 0 < timing.p10_s <= timing.median_s <= timing.p90_s
    assert {s.rank for s in trace if s.name.startswith("forward")} == {0, 1, 2}
    assert any(s.name == "optimizer step" for s in trace)


def test_compare_rows_put_prediction_beside_measurement():
    rows = compare(SMOKE_WIDTHS, 6, (1, 2), repeats=2)
    assert [r["replicas"] for r in rows] == [1, 2]
    for r in rows:
        assert list(r["phases"]) == list(PHASES)
        assert sum(r["phases"].values()) == pytest.approx(r["predicted_s"])
        assert r["rel_error"] == pytest.approx(
            (r["predicted_s"] - r["measured_median_s"]) / r["measured_median_s"])
