"""The stubs as handed out earn nothing, on every task, and say why: grading them the way a
student runs ``make grade`` gives 0 points everywhere, each task's first failure the stub's
"not implemented" message (never an error of the grader's own). CI grades the solutions too:
the rest of tests/exercises runs with ``DISTML_IMPL=solutions``, every test passing."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.exercises.points import POINTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_stubs_earn_zero_points_on_every_task(tmp_path):
    out = tmp_path / "grades.json"
    env = {**os.environ, "DISTML_IMPL": "exercises", "HYPOTHESIS_PROFILE": "stubs"}
    done = subprocess.run([sys.executable, "-m", "tests.exercises.gradebook", "--all",
                           "--json", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]  # not full points
    tasks = {t["exercise"]: t for t in json.loads(out.read_text())["tasks"]}
    assert set(tasks) == set(POINTS)
    for name, task in tasks.items():
        assert task["possible"] == POINTS[name] > 0, name
        assert task["earned"] == 0 and task["passed"] == 0, (name, task)
        assert "not implemented" in task["first_failure"], (name, task["first_failure"])
