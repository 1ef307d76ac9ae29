"""Strategy twins' timelines: one step predicted (the simulator's trace) and measured (the real
twin's spans, every rank's) at world 2; a failure is said in the twin's section. (That the
report links what it drew: tests/lab/test_report.py, chapter 14.)"""

import pytest

from lab.report import strategy_timeline
from lab.report_sections import Section, twin_section
from lab.strategies import all_strategies, get_strategy
from simulator.core.calibration import CalibrationEntry, save_entry, this_host

TIMELINES = [t.name for t in all_strategies() if t.timeline is not None]


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """A calibration with made-up numbers at 2 to 4 ranks (a parameter server's 1 + 1 + 2):
    a timeline reads it, never checks it against this machine."""
    from simulator.core.calibration import Calibration

    path = tmp_path_factory.mktemp("timelines") / "cal.json"
    for world in (2, 3, 4):
        save_entry(CalibrationEntry(this_host(), "gloo", world, 5e-5, 4e9, 1.2e10, 1.4e10,
                                    1e11), path)
    return Calibration.load(path)


def test_every_strategy_twin_but_zero_has_a_timeline():
    assert {"ps.bsp", "ps.ssp", "ps.async", "data_parallel", "ddp", "horovod",
            "pipeline.gpipe", "pipeline.1f1b", "pipeline.interleaved", "pipedream", "megatron",
            "rpc.split"} <= set(TIMELINES)


@pytest.mark.parametrize("name", TIMELINES)
def test_one_step_is_predicted_and_measured_on_every_rank(name, calibration):
    twin = get_strategy(name)
    assert twin is not None and twin.timeline is not None
    point = twin.points_at(2, twin.quick_points)[0]
    predicted, measured = twin.timeline(2, point, calibration, "host")
    ranks = {s.rank for s in predicted}
    assert len(ranks) >= 2 and all(s.end >= s.start >= 0 for s in predicted)
    assert measured is not None, f"{name} has no measured timeline"
    assert ranks <= {s.rank for s in measured}  # every rank the prediction draws was traced
    assert min(s.start for s in measured) == 0.0 and all(s.end >= s.start for s in measured)


def _failing(world, point, calibration, model):
    raise RuntimeError("no step today\nsecond line")


def test_a_timeline_that_fails_is_said_in_its_section_and_the_rest_stands(tmp_path):
    from dataclasses import replace

    twin = replace(get_strategy("ddp"), timeline=_failing)
    logged = []
    fields = strategy_timeline(twin, (2,), (16.0,), None, ("host",), tmp_path, logged.append)
    assert fields == {"timeline_note": "The timelines could not be drawn "
                                       "(RuntimeError: no step today)."}
    assert not list(tmp_path.iterdir()) and "no timeline" in logged[-1]
    row = {"twin": "ddp", "world": 2, "point": {"bucket_mb": 16.0}, "bytes": 1,
           "predicted_s": 1.0, "measured_median_s": 1.0, "measured_p10_s": 1.0,
           "measured_p90_s": 1.0, "rel_error": 0.0}
    lines = twin_section(Section("ddp", "5-6", "DDP", [row], "bucket_mb", **fields), ["host"])
    assert "The timelines could not be drawn (RuntimeError: no step today)." in lines
    assert not any("timeline.png" in line for line in lines)
