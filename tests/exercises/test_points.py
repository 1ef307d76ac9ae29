"""The grading table agrees with the exercises: every banner quotes its points, every exercise
has tests carrying its marker, and every chapter 1–19 has at least three exercises."""

import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from tests.exercises.gradebook import Task, selection, table
from tests.exercises.points import POINTS, chapter, marker

ROOT = Path(__file__).resolve().parents[2]
BANNER = re.compile(r"# ===== EXERCISE (\d+\.\d+)[^\n]*\n\s*#\n\s*# Points: (\d+) ")


def banners():
    """``{exercise: points}`` as the stubs under exercises/ state them."""
    found = {}
    for path in sorted((ROOT / "exercises").glob("ch*.py")):
        for ex, points in BANNER.findall(path.read_text()):
            found[ex] = int(points)
    return found


def test_every_banner_quotes_the_points_of_the_table():
    assert banners() == POINTS


def test_every_exercise_has_tests_with_its_marker_and_chapter():
    marked = {}
    for path in sorted((ROOT / "tests" / "exercises").glob("test_ch*.py")):
        text = path.read_text()
        names = re.findall(r"pytest\.mark\.(ex\d\d_\d+)", text)
        assert len(set(names)) == 1, f"{path.name}: marks {names}, expected one exercise"
        marked[names[0]] = path.name
        ch = re.search(r"pytest\.mark\.(ch\d\d)", text)
        assert ch and ch[1] == "ch" + names[0][2:4], path.name
    assert set(marked) == {marker(ex) for ex in POINTS}


def test_every_marker_is_registered():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    registered = {m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    assert {marker(ex) for ex in POINTS} | {f"ch{chapter(ex):02d}" for ex in POINTS} <= registered


def test_every_chapter_has_at_least_three_exercises():
    per_chapter = Counter(chapter(ex) for ex in POINTS)
    assert all(per_chapter[c] >= 3 for c in range(1, 20)), per_chapter


def test_points_are_earned_in_proportion_to_the_counted_tests():
    assert Task("6.1", 10, passed=3, failed=1, skipped=5).earned == 7.5
    assert Task("6.1", 10, skipped=2).earned == 0.0
    text = table([Task("6.1", 10, passed=1, failed=1, first_failure="boom")])
    assert "5.0 / 10" in text and "boom" in text and "total" in text


@pytest.mark.parametrize(("ch", "ex", "expression"), [("06", None, "ch06"), ("6", None, "ch06"),
                                                      (None, "6.1", "ex06_1"),
                                                      ("13", None, "ch13")])
def test_selection(ch, ex, expression):
    assert selection(ch, ex)[0] == expression


@pytest.mark.parametrize(("ch", "ex"), [("x", None), ("99", None), (None, "6.9"), (None, "6")])
def test_selection_refuses_what_names_no_exercise(ch, ex):
    with pytest.raises(ValueError):
        selection(ch, ex)
