"""Grade the exercises per task, with points: run their tests and print one row per task.

Run from the repository root (``make grade`` does)::

    DISTML_IMPL=exercises .venv/bin/python -m tests.exercises.gradebook --chapter 06
    DISTML_IMPL=exercises .venv/bin/python -m tests.exercises.gradebook --exercise 6.1

It runs ``pytest -m ch06`` (or ``-m ex06_1``) on ``tests/exercises`` in this process, with
:class:`Tally` as a plugin, then prints::

    task  points      tests  first failure
    6.1    0.0 / 10   0/7    EXERCISE 6.1: implement HookReducer.mark_ready in …

Points per task are in :mod:`tests.exercises.points`; a task earns them in proportion to its
tests that pass (skipped tests count for nothing). ``--json PATH`` also writes the rows, for
``distml-lab grade``. Exit status: 0 when every selected task earns full points, 1 otherwise,
2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.exercises.points import POINTS, chapter, exercise, marker, order

HERE = Path(__file__).resolve().parent


@dataclass
class Task:
    """One exercise's outcome: its tests passed, failed (or errored) and skipped."""

    exercise: str
    possible: int
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    first_failure: str = ""

    @property
    def earned(self) -> float:
        """Points earned: the possible points times the share of counted tests that pass."""
        counted = self.passed + self.failed
        return round(self.possible * self.passed / counted, 1) if counted else 0.0


def one_line(report: pytest.TestReport) -> str:
    """The failure of ``report`` in one line: the crash message, or the failure text."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    first = text.strip().split("\n")[0].removeprefix("Failed: ")  # hypothesis adds lines below
    return " ".join(first.split())[:200]


class Tally:
    """Pytest plugin: counts each test's outcome under the exercise its ``exNN_k`` marker names."""

    def __init__(self, exercises: list[str]):
        self.tasks = {ex: Task(ex, POINTS[ex]) for ex in exercises}
        self.owner: dict[str, str] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            names = [exercise(m.name) for m in item.iter_markers()]
            found = [name for name in names if name in self.tasks]
            if found:
                self.owner[item.nodeid] = found[0]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        task = self.tasks.get(self.owner.get(report.nodeid, ""))
        if task is None:
            return
        if report.failed:  # in setup, call or teardown: a test fails once
            task.failed += 1
            task.first_failure = task.first_failure or one_line(report)
        elif report.skipped:
            task.skipped += 1
        elif report.passed and report.when == "call":
            task.passed += 1


def table(tasks: list[Task]) -> str:
    """The rows as text, and a total."""
    lines = [f"{'task':<6}{'points':>14}  {'tests':>7}  first failure"]
    for t in tasks:
        tests = f"{t.passed}/{t.passed + t.failed}"
        note = t.first_failure or ("all tests skipped" if not t.passed + t.failed else "")
        lines.append(f"{t.exercise:<6}{t.earned:>7.1f} / {t.possible:<4}  {tests:>7}  {note}")
    earned, possible = sum(t.earned for t in tasks), sum(t.possible for t in tasks)
    lines.append(f"{'total':<6}{earned:>7.1f} / {possible:<4}")
    return "\n".join(lines)


def selection(chapter_arg: str | None, exercise_arg: str | None) -> tuple[str, list[str]]:
    """The ``-m`` expression and the exercises it selects.

    Raises:
        ValueError: neither given, or one that names no exercise.
    """
    if exercise_arg:
        ex = exercise_arg.strip()
        mark = marker(ex)
        if ex not in POINTS:
            raise ValueError(f"there is no exercise {ex}; exercises: {', '.join(POINTS)}")
        return mark, [ex]
    if chapter_arg:
        if not chapter_arg.strip().isdigit():
            raise ValueError(f"chapter {chapter_arg!r}: expected a number such as 06")
        number = int(chapter_arg)
        chosen = sorted((ex for ex in POINTS if chapter(ex) == number), key=order)
        if not chosen:
            raise ValueError(f"chapter {number} has no exercises")
        return f"ch{number:02d}", chosen
    chosen = sorted(POINTS, key=order)
    return " or ".join(f"ch{c:02d}" for c in sorted({chapter(ex) for ex in chosen})), chosen


def grade(chapter_arg: str | None, exercise_arg: str | None, pytest_args: list[str],
          json_path: Path | None = None) -> tuple[int, list[Task]]:
    """Run the selected tests in this process; returns (exit status, the tasks)."""
    expression, chosen = selection(chapter_arg, exercise_arg)
    tally = Tally(chosen)
    code = pytest.main(["-q", "--tb=short", "-p", "no:cacheprovider", "-m", expression,
                        *pytest_args, str(HERE)], plugins=[tally])
    tasks = [tally.tasks[ex] for ex in chosen]
    if json_path is not None:
        rows: list[dict[str, Any]] = [{**asdict(t), "earned": t.earned} for t in tasks]
        json_path.write_text(json.dumps({"pytest_status": int(code), "tasks": rows}, indent=1))
    print("\n" + table(tasks))
    full = all(t.earned == t.possible for t in tasks)
    return (0 if full else 1), tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.exercises.gradebook",
                                     description="Grade the exercises per task, with points.")
    parser.add_argument("--chapter", help="grade every exercise of a chapter, e.g. 06")
    parser.add_argument("--exercise", help="grade one exercise, e.g. 6.1")
    parser.add_argument("--all", action="store_true", help="grade every exercise")
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--list", action="store_true",
                        help="write the selected tasks and their points, running nothing")
    args, pytest_args = parser.parse_known_args(argv)
    if not (args.chapter or args.exercise or args.all):
        print("usage: make grade CH=06  or  make grade EX=6.1", file=sys.stderr)
        return 2
    try:
        if args.list:
            rows = [{**asdict(Task(ex, POINTS[ex])), "earned": 0.0}
                    for ex in selection(args.chapter, args.exercise)[1]]
            text = json.dumps({"pytest_status": None, "tasks": rows}, indent=1)
            if args.json:
                args.json.write_text(text)
            else:
                print(text)
            return 0
        code, _ = grade(args.chapter, args.exercise, pytest_args, args.json)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
