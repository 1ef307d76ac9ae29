"""``lab.grade``: a class folder holding the reference answers, the stubs and one broken copy
(an infinite loop in 13.1, a hard crash in 13.3) gets the right CSV; the broken copy loses the
broken tasks only."""

import csv
import shutil
from pathlib import Path

import pytest

from lab.grade import grade_class
from lab.units import UsageError

ROOT = Path(__file__).resolve().parents[2]

LOOPS = '''
def message_count(stages):
    while True:
        pass
'''
CRASHES = '''
import os


def calls_time(calls, alpha_s, beta_s_per_B, asynchronous):
    os._exit(3)
'''


@pytest.fixture
def submissions(tmp_path):
    root = tmp_path / "class"
    shutil.copytree(ROOT / "solutions", root / "ada", ignore=shutil.ignore_patterns("__py*"))
    shutil.copytree(ROOT / "exercises", root / "bob", ignore=shutil.ignore_patterns("__py*"))
    shutil.copytree(ROOT / "solutions", root / "cyd", ignore=shutil.ignore_patterns("__py*"))
    (root / "cyd" / "ch13_messages.py").write_text(LOOPS)
    (root / "cyd" / "ch13_rpc_call.py").write_text(CRASHES)
    return root


@pytest.mark.slow
def test_the_class_csv(submissions, tmp_path):
    out = tmp_path / "grades.csv"
    grade_class(submissions, out, chapters=[13], time_limit_s=120, task_time_limit_s=60,
                test_timeout_s=1)
    rows = list(csv.DictReader(out.open()))
    assert [r["student"] for r in rows] == ["ada", "bob", "cyd"]
    points = [[float(r[ex]) for ex in ("13.1", "13.2", "13.3")] for r in rows]
    assert points == [[4, 8, 4], [0, 0, 0], [0, 8, 0]]
    assert [float(r["total"]) for r in rows] == [16, 0, 8]
    assert all(r["possible"] == "16" for r in rows)
    assert rows[0]["notes"] == rows[1]["notes"] == ""
    assert "13.3: crashed" in rows[2]["notes"] and "13.1" not in rows[2]["notes"]


def test_a_folder_without_students_is_refused(tmp_path):
    with pytest.raises(UsageError):
        grade_class(tmp_path, tmp_path / "grades.csv")
    with pytest.raises(UsageError):
        grade_class(tmp_path / "missing", tmp_path / "grades.csv")


@pytest.mark.parametrize("out", ["grades.txt", "no/such/folder/grades.csv"])
def test_an_out_that_is_not_a_csv_in_a_folder_is_refused(tmp_path, out):
    (tmp_path / "class" / "ada").mkdir(parents=True)
    with pytest.raises(UsageError):
        grade_class(tmp_path / "class", tmp_path / out)
    assert not (tmp_path / out).exists()
