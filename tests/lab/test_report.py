"""The report: ``distml-lab report --quick`` writes a complete report of the chapters chosen, both
model tiers side by side, or nothing."""

import json

import pytest

from lab.cli import main
from lab.report import CHAPTERS, build_report, parse_chapters, plan
from lab.strategies import all_strategies
from lab.strategy_cli import in_chapter
from lab.twins import all_twins
from lab.units import UsageError


def test_quick_report_has_every_chosen_twins_table_plot_and_traces(tmp_path):
    cal = tmp_path / "cal.json"
    index = build_report(tmp_path / "report", quick=True, calibration=cal, log=lambda m: None,
                         chapters=[1, 14])
    text = index.read_text()
    files = {p.name for p in index.parent.iterdir()}
    tour = [t for t in all_twins() if t.tour and t.chapter.startswith("1")]
    assert {"ping_pong", "one_to_all"} <= {t.name for t in tour}
    for twin in tour:
        assert f"## {twin.name}" in text
        assert {f"{twin.name}.csv", f"{twin.name}.png", f"{twin.name}.timeline.png",
                f"{twin.name}.predicted.trace.json", f"{twin.name}.measured.trace.json"} <= files
        doc = json.loads((index.parent / f"{twin.name}.measured.trace.json").read_text())
        assert any(e["ph"] == "X" for e in doc["traceEvents"])
        rows = json.loads((index.parent / f"{twin.name}.json").read_text())["records"]
        for r in rows:  # both tiers, each with its own error against the one measurement
            assert r["model"] == "both" and r["predicted_s"] == r["predicted_host_s"]
            for tier in ("textbook", "host"):
                assert r[f"rel_error_{tier}"] == pytest.approx(
                    r[f"predicted_{tier}_s"] / r["measured_median_s"] - 1)
    assert "## all_reduce.ring" not in text  # chapter 2 was not asked for
    for name in ("zero.1", "zero.2", "zero.3"):
        assert f"## {name} (chapter 14)" in text
        assert {f"{name}.csv", f"{name}.json", f"{name}.png"} <= files
        rows = json.loads((index.parent / f"{name}.json").read_text())["records"]
        assert rows and all(r["predicted_textbook_s"] > 0 and r["predicted_host_s"] > 0
                            and "hidden" in r["point"] for r in rows)
    for drawn in ("zero.1.timeline.png", "zero.1.predicted.trace.json",
                  "zero.1.measured.trace.json"):  # one step's timelines, linked
        assert drawn in files and f"({drawn})" in text
    assert not [f for f in files if f.startswith(("zero.2.", "zero.3.")) and "trace" in f]
    assert text.count("see zero.1's") == 2  # a quick report draws one twin's per chapter
    summary = text[text.index("## Summary"):text.index("\n## ", text.index("## Summary") + 1)]
    assert "| 1-2 |" in summary and "| 14 |" in summary and "textbook median" in summary
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report-")]


def test_the_plan_covers_every_chapter_of_the_book():
    work = plan(CHAPTERS, quick=True)
    names = {t.name for t, _, _ in work.collectives} | {t.name for t, _, _ in work.strategies}
    assert {t.name for t in all_strategies()} <= names
    covered = {c for c in CHAPTERS for t in [*all_twins(), *all_strategies()]
               if t.name in names and in_chapter(t.chapter, str(c))}
    assert covered == set(CHAPTERS)
    assert all(len(worlds) == 1 for _, worlds, _ in work.strategies)


@pytest.mark.parametrize("text, chapters", [(None, list(CHAPTERS)), ("5", [5]),
                                            ("14,1,2,2", [1, 2, 14])])
def test_chapters_are_parsed(text, chapters):
    assert parse_chapters(text) == chapters


@pytest.mark.parametrize("text", ["", "0", "24", "1,,2", "one", "2-3", "٣"])
def test_bad_chapters_are_one_line(text, capsys, no_work, tmp_path):
    with pytest.raises(UsageError):
        parse_chapters(text)
    assert main(["report", "--chapters", text, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--chapters" in err
    assert not (tmp_path / "r").exists()
