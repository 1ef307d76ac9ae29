"""The chapter-18 strategy twins ``tf.mirrored`` and ``tf.multi_worker_mirrored``: registered,
and predicting and measuring a step on a tiny MLP."""

from __future__ import annotations

import pytest

from lab import tf_distribute
from lab.strategies import all_strategies, get_strategy
from simulator.core.calibration import Calibration, CalibrationEntry, save_entry, this_host


def test_both_twins_are_registered_for_chapters_17_and_18() -> None:
    names = {t.name: t for t in all_strategies()}
    mirrored, workers = names["tf.mirrored"], names["tf.multi_worker_mirrored"]
    assert (mirrored.chapter, workers.chapter) == ("17-18", "18")
    assert (mirrored.world_unit, mirrored.calibrated, mirrored.min_world) == ("replicas",
                                                                              False, 1)
    assert (workers.world_unit, workers.calibrated) == ("workers", True)
    assert mirrored.parameter == workers.parameter == "batch"


def test_thread_speed_is_one_for_one_thread_and_positive_for_several() -> None:
    assert tf_distribute.thread_speed(tf_distribute.SMOKE_WIDTHS, 8, 1) == 1.0
    assert tf_distribute.thread_speed(tf_distribute.SMOKE_WIDTHS, 8, 2, repeats=2) > 0


def test_mirrored_twin_predicts_every_tier_alike_and_measures(monkeypatch) -> None:
    monkeypatch.setattr(tf_distribute, "WIDTHS", tf_distribute.SMOKE_WIDTHS)
    twin = get_strategy("tf.mirrored")
    assert twin is not None
    (row,) = twin.predict(3, [7], None, ("textbook", "host"))  # type: ignore[arg-type]
    assert row["predicted"]["textbook"] == row["predicted"]["host"] > row["all_reduce_s"] > 0
    (measured,) = twin.measure(3, [7], 2)
    assert 0 < measured["p10_s"] <= measured["median_s"] <= measured["p90_s"]
    assert measured["bytes"] == 4 * (32 * 64 + 64 + 64 * 10 + 10)


def test_multi_worker_twin_predicts_both_tiers_from_the_calibration(tmp_path,
                                                                    monkeypatch) -> None:
    monkeypatch.setattr(tf_distribute, "WIDTHS", tf_distribute.SMOKE_WIDTHS)
    path = tmp_path / "calibration.json"
    save_entry(CalibrationEntry(host=this_host(), backend="gloo", world_size=2,
                                latency_s=5e-5, bandwidth_Bps=4e9, reduce_Bps=1.2e10,
                                memcpy_Bps=1.4e10, flops_per_s=1e11), path)
    twin = get_strategy("tf.multi_worker_mirrored")
    assert twin is not None
    (row,) = twin.predict(2, [8], Calibration.of(path), ("textbook", "host"))
    assert set(row["predicted"]) == {"textbook", "host"}
    assert all(s > row["all_reduce_s"] > 0 for s in row["predicted"].values())
    # the ring of 2 moves the 10.6 kB buffer once each way: at least 2·α
    assert row["all_reduce_s"] >= 2 * 5e-5


def test_compare_mirrored_rows_carry_the_phases() -> None:
    (row,) = tf_distribute.compare_mirrored(tf_distribute.SMOKE_WIDTHS, 5, [2], repeats=2,
                                            cross_device_ops="one_device")
    assert row["replicas"] == 2 and row["cross_device_ops"] == "one_device"
    assert row["predicted_s"] == pytest.approx(row["compute_s"] + row["all_reduce_s"]
                                               + row["update_s"])
    assert row["measured_median_s"] > 0
