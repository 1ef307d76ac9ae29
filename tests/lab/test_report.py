"""The tour: ``distml-lab report --quick`` writes a complete report, or nothing."""

import json

from lab.report import build_report
from lab.twins import all_twins


def test_quick_report_has_every_tour_twins_table_plot_and_traces(tmp_path):
    cal = tmp_path / "cal.json"
    index = build_report(tmp_path / "report", quick=True, calibration=cal, log=lambda m: None)
    text = index.read_text()
    files = {p.name for p in index.parent.iterdir()}
    tour = [t for t in all_twins() if t.tour]
    assert {"ping_pong", "all_reduce.ring"} <= {t.name for t in tour}
    for twin in tour:
        assert f"## {twin.name}" in text
        assert {f"{twin.name}.csv", f"{twin.name}.png", f"{twin.name}.timeline.png",
                f"{twin.name}.predicted.trace.json", f"{twin.name}.measured.trace.json"} <= files
        doc = json.loads((index.parent / f"{twin.name}.measured.trace.json").read_text())
        assert any(e["ph"] == "X" for e in doc["traceEvents"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report-")]
