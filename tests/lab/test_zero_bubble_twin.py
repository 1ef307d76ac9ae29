"""The zero-bubble twins through the registry: predict and measure a quick point at world 2;
the predicted and measured peak activation bytes agree exactly (the same action list, the
same saved tensors); a size the schedule cannot run is a one-line usage error."""

import pytest

from lab.strategies import STRATEGIES, all_strategies, merge
from lab.units import UsageError
from lab.zero_bubble import ZeroBubbleSetup, even_balance


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    from simulator.core.calibration import Calibration, CalibrationEntry, save_entry, this_host

    path = tmp_path_factory.mktemp("cal") / "calibration.json"
    save_entry(CalibrationEntry(host=this_host(), backend="gloo", world_size=2,
                                latency_s=5e-5, bandwidth_Bps=4e9, reduce_Bps=1.2e10,
                                memcpy_Bps=1.4e10, flops_per_s=1e11), path)
    return Calibration.of(path)


def test_three_twins_of_chapter_23_are_registered():
    all_strategies()
    for name in ("pipeline.zb_h1", "pipeline.zbv", "pipeline.dualpipev"):
        assert STRATEGIES[name].chapter == "23"
        assert STRATEGIES[name].parameter == "microbatches"


def test_predict_and_measure_a_quick_point_at_world_2(calibration):
    all_strategies()
    twin = STRATEGIES["pipeline.zbv"]
    point = twin.quick_points[0]
    predicted, = twin.predict(2, (point,), calibration, ("textbook", "host"))
    measured, = twin.measure(2, (point,), 1)
    assert predicted["predicted"]["host"] > 0 and 0 <= predicted["predicted_bubble"] < 1
    assert 0 <= measured["measured_bubble"] < 1
    assert measured["median_s"] > 0 and measured["builtin_median_s"] > 0
    assert predicted["predicted_peak_activation_bytes"] == \
        measured["measured_peak_activation_bytes"]
    row = merge(twin, 2, point, predicted, measured, ("textbook", "host"))
    assert row["rel_error_peak"] == 0.0


def test_dualpipev_below_2p_microbatches_is_a_usage_error(calibration):
    all_strategies()
    with pytest.raises(UsageError, match="at least 4 micro-batches"):
        STRATEGIES["pipeline.dualpipev"].predict(2, (3,), calibration, ("host",))


def test_the_v_cuts_the_model_into_twice_the_stages():
    assert ZeroBubbleSetup(stages=2, schedule="zbv").balance == (2, 2, 2, 2)
    assert ZeroBubbleSetup(stages=3, schedule="zbv").balance == even_balance(8, 6) == \
        (2, 2, 1, 1, 1, 1)
