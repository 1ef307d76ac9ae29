"""The ``fsdp`` strategy twin (chapter 20) through the registry at world 2 on its quick point:
listed under chapter 20 with memory; its prediction (a one-process profile, a calibration)
and its measurement (ours and ``fully_shard``'s steps on 2 processes) merge into a row with
both times, both peaks within 2 %, the model states equal, the speed ratio and ZeRO-3's traffic."""

import pytest

from lab.models import parameter_count
from lab.strategies import get_strategy, merge
from lab.strategies_fsdp import widths

pytestmark = pytest.mark.timeout(180)


def _calibration(tmp_path):
    from simulator.core.calibration import Calibration, CalibrationEntry, save_entry, this_host

    path = tmp_path / "calibration.json"
    save_entry(CalibrationEntry(host=this_host(), backend="gloo", world_size=2,
                                latency_s=5e-5, bandwidth_Bps=4e9, reduce_Bps=1.2e10,
                                memcpy_Bps=1.4e10, flops_per_s=1e11), path)
    return Calibration.of(path)


def test_fsdp_twin_is_registered_under_chapter_20_with_memory():
    twin = get_strategy("fsdp")
    assert twin is not None and twin.chapter == "20" and twin.memory
    assert twin.describe()["quick_points"] == [256]


def test_predict_and_measure_through_the_registry_at_world_two(tmp_path):
    twin = get_strategy("fsdp")
    hidden, = twin.quick_points
    predicted, = twin.predict(2, [hidden], _calibration(tmp_path), ("textbook",))
    measured, = twin.measure(2, [hidden], 2)
    row = merge(twin, 2, hidden, predicted, measured, ("textbook",))
    assert row["predicted_s"] > 0 and row["measured_median_s"] > 0
    assert row["pytorch_median_s"] > 0
    assert row["speed_ratio"] == pytest.approx(row["measured_median_s"]
                                               / row["pytorch_median_s"])
    assert abs(row["rel_error_peak"]) <= 0.02
    assert row["predicted_model_state_bytes"] == row["measured_model_state_bytes"] > 0
    psi = parameter_count(widths(hidden))
    assert row["predicted_traffic_bytes"] == pytest.approx(3 * 0.5 * 4 * psi, rel=1e-3)
