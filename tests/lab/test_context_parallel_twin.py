"""The context-parallel twins through the registry: ``cp.ring`` and ``cp.ulysses`` are listed
under chapter 21, and at world 2 on the quick point both predict (from a one-process profile
and a calibration) and measure (the real step on two processes), merging into one row."""

import pytest

from lab.strategies import get_strategy, merge
from simulator.core.calibration import Calibration, CalibrationEntry, save_entry, this_host


@pytest.fixture
def calibration(tmp_path):
    path = tmp_path / "calibration.json"
    save_entry(CalibrationEntry(host=this_host(), backend="gloo", world_size=2,
                                latency_s=5e-5, bandwidth_Bps=4e9, reduce_Bps=1.2e10,
                                memcpy_Bps=1.4e10, flops_per_s=1e11), path)
    return Calibration.of(path)


@pytest.mark.parametrize("name", ["cp.ring", "cp.ulysses"])
def test_the_twin_predicts_and_measures_a_quick_point_at_world_2(name, calibration):
    twin = get_strategy(name)
    assert twin is not None and twin.chapter == "21" and twin.parameter == "seq"
    point = twin.quick_points[0]
    predicted, = twin.predict(2, [point], calibration, ("textbook",))
    measured, = twin.measure(2, [point], 2)
    assert predicted["predicted"]["textbook"] > 0
    assert predicted["bytes"] == measured["bytes"] > 0
    assert predicted["predicted_activation_bytes"] > 0
    assert 0 < measured["p10_s"] <= measured["median_s"] <= measured["p90_s"]
    row = merge(twin, 2, point, predicted, measured, ("textbook",))
    assert row["rel_error"] == pytest.approx(
        (row["predicted_s"] - row["measured_median_s"]) / row["measured_median_s"])


def test_ulysses_refuses_a_world_its_heads_do_not_divide_over(calibration):
    twin = get_strategy("cp.ulysses")
    assert twin is not None
    with pytest.raises(ValueError, match="heads and seq divisible by world = 3"):
        twin.predict(3, [twin.quick_points[0]], calibration, ("textbook",))
