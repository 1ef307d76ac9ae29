"""The ``tf.parameter_server`` strategy twin (book chapter 19)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.strategies import get_strategy, run_comparison
from lab.tf_ps import NUM_PS, Primitives, closure_bytes, predict, schedule
from simulator.core.calibration import Calibration
from simulator.tf_distribute.ps_strategy import closure_time_s

MESSAGES = {"dispatch": 300, "pulls": [(0, 512, 4096), (1, 512, 4096), (0, 0, 64)],
            "pushes": [(0, 4608, 0), (1, 4608, 0), (0, 64, 0), (1, 12, 0)]}
PRIMS = Primitives(compute_s=1e-3, latency_s=1e-4, busy_latency_s=3e-4, bandwidth_Bps=1e9,
                   ps_busy_s=5e-5,
                   messages=MESSAGES)


def test_registered_in_chapter_19_over_closures_and_workers() -> None:
    twin = get_strategy("tf.parameter_server")
    assert twin is not None
    assert (twin.chapter, twin.parameter, twin.world_unit) == ("19", "closures", "workers")
    assert not twin.calibrated
    assert twin.processes(3, 16) == 1 + 3 + NUM_PS


def test_textbook_tier_of_one_worker_runs_closures_back_to_back() -> None:
    one = closure_time_s(PRIMS.cost(), PRIMS.channel())
    assert predict(PRIMS, workers=1, closures=6, model="textbook") == pytest.approx(6 * one)


def test_host_tier_pays_busy_latency_and_ps_queueing() -> None:
    busy_only = Primitives(1e-3, 3e-4, 3e-4, 1e9, 0.0, MESSAGES)  # textbook at α_busy
    assert predict(PRIMS, 3, 12, "host") > predict(busy_only, 3, 12, "textbook")
    assert predict(busy_only, 3, 12, "textbook") > predict(PRIMS, 3, 12, "textbook")


def test_straggler_shifts_closures_to_the_others() -> None:
    run = schedule(PRIMS, workers=2, closures=20, model="textbook", slowdown=[1.0, 6.0])
    fast, slow = run.closures_per_worker(2)
    assert fast > slow > 0


def test_comparison_row_predicts_and_measures_one_point() -> None:
    twin = get_strategy("tf.parameter_server")
    assert twin is not None
    rows = run_comparison(twin, worlds=[2], points=[6], repeats=1,
                          calibration=Calibration(Path("unused.json"), {}),
                          models=("textbook", "host"))
    (row,) = rows
    assert row["twin"] == "tf.parameter_server" and row["point"] == {"closures": 6}
    assert row["predicted_textbook_s"] > 0 and row["measured_median_s"] > 0
    assert row["bytes"] == closure_bytes(6) > 6 * 4 * 4096  # the pulled rows at least
    assert sum(row["closures_per_worker"]) == 6
    assert sum(row["predicted_closures_per_worker"]) == 6
    assert row["rel_error"] == pytest.approx(
        (row["predicted_s"] - row["measured_median_s"]) / row["measured_median_s"])
