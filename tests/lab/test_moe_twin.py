"""The expert-parallel twin through the registry: ``moe`` is chapter 22's, its prediction and
its measurement at world 2 on the quick point give one row each, and the bytes the busiest
rank moves and the assignments dropped — predicted from the one-process routing, measured from
the ranks' own — are the same."""

from lab.strategies import STRATEGIES, all_strategies, get_strategy, merge


def test_moe_is_registered_as_chapter_22():
    twin = get_strategy("moe")
    assert twin is not None and twin.chapter == "22" and twin.parameter == "tokens"
    assert twin in all_strategies() and STRATEGIES["moe"] is twin
    assert twin.quick_worlds == (2,) and all(t > 0 for t in twin.quick_points)


def test_predict_and_measure_at_world_2_on_the_quick_point(tmp_path):
    from simulator.core.calibration import Calibration, CalibrationEntry, save_entry, this_host

    path = tmp_path / "calibration.json"
    save_entry(CalibrationEntry(host=this_host(), backend="gloo", world_size=2,
                                latency_s=5e-5, bandwidth_Bps=4e9, reduce_Bps=1.2e10,
                                memcpy_Bps=1.4e10, flops_per_s=1e11), path)
    twin = get_strategy("moe")
    assert twin is not None
    point = twin.quick_points[0]
    predicted, = twin.predict(2, [point], Calibration.of(path), ("textbook", "host"))
    measured, = twin.measure(2, [point], 3)
    assert set(predicted["predicted"]) == {"textbook", "host"}
    assert all(s > 0 for s in predicted["predicted"].values())
    assert 0 < measured["p10_s"] <= measured["median_s"] <= measured["p90_s"]
    assert predicted["bytes"] == measured["bytes"] > 0
    assert predicted["predicted_dropped"] == measured["measured_dropped"]
    row = merge(twin, 2, point, predicted, measured, ("textbook", "host"))
    assert row["twin"] == "moe" and row["point"] == {"tokens": point}
    assert row["rel_error"] == (row["predicted_s"] - row["measured_median_s"]) / \
        row["measured_median_s"]
