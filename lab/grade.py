"""``distml-lab grade SUBMISSIONS --out grades.csv``: grade a class's copies of ``exercises/``.

``SUBMISSIONS`` holds one folder per student, each a copy of ``exercises/`` with the student's
answers. Every student is graded in processes of their own, so that nothing a student's code
does reaches another student:

1. one process runs every selected task's tests (``python -m tests.exercises.gradebook``, the
   grader behind ``make grade``) with the chapter modules imported from the student's folder
   (``DISTML_EXERCISES_DIR``); ``pytest-timeout`` fails a single test that runs past
   ``test_timeout_s``, so an infinite loop costs that test;
2. if that process does not report — the student's code killed it (a crash, ``os._exit``) or
   it ran past ``time_limit_s`` — each task is graded again in a process of its own, limited to
   ``task_time_limit_s``; a task whose process dies or runs out of time earns 0 points, and the
   others keep theirs.

The CSV has one row per student: the points earned on each task (columns ``1.1``, ``1.2``, …),
the total and the possible points, and a note naming the tasks that crashed or ran out of time.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.units import UsageError

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: the grader and its tests run from here."""

TIME_LIMIT_S = 1800.0
"""Default limit of a student's first, all-task process, s."""
TASK_TIME_LIMIT_S = 300.0
"""Default limit of one task's own process in the second pass, s."""
TEST_TIMEOUT_S = 120.0
"""Default limit of one test (pytest-timeout), s."""


@dataclass
class StudentGrade:
    """One student's row: points per task, what was possible, and what went wrong."""

    student: str
    earned: dict[str, float] = field(default_factory=dict)
    possible: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return round(sum(self.earned.values()), 1)


def gradebook_run(student_dir: Path, selection: list[str], limit_s: float,
                  test_timeout_s: float) -> tuple[list[dict[str, Any]] | None, str]:
    """Run the gradebook on one student's folder in a child process.

    Returns the task rows it reported, or ``None`` and why (it crashed or ran out of time).
    """
    with tempfile.TemporaryDirectory(prefix="distml-grade-") as tmp:
        report = Path(tmp) / "tasks.json"
        env = {**os.environ, "DISTML_IMPL": "exercises",
               "DISTML_EXERCISES_DIR": str(student_dir.resolve())}
        command = [sys.executable, "-m", "tests.exercises.gradebook", *selection,
                   "--json", str(report), f"--timeout={test_timeout_s:g}"]
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, timeout=limit_s)
        except subprocess.TimeoutExpired:
            return None, f"ran past the time limit of {limit_s:g} s"
        if not report.exists():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"crashed (exit status {done.returncode}: {last[:120]})"
        rows: list[dict[str, Any]] = json.loads(report.read_text())["tasks"]
        return rows, ""


def grade_student(student_dir: Path, selection: list[str], time_limit_s: float,
                  task_time_limit_s: float, test_timeout_s: float) -> StudentGrade:
    """All tasks in one process; if it fails to report, each task in its own."""
    grade = StudentGrade(student_dir.name)
    rows, why = gradebook_run(student_dir, selection, time_limit_s, test_timeout_s)
    if rows is not None:
        for row in rows:
            grade.earned[row["exercise"]] = row["earned"]
            grade.possible[row["exercise"]] = row["possible"]
        return grade
    grade.notes.append(f"all tasks at once: {why}; graded task by task")
    tasks, _ = gradebook_run(student_dir, [*selection, "--list"], time_limit_s, test_timeout_s)
    for task in tasks or []:  # the selected tasks and their points; runs no test
        ex = task["exercise"]
        grade.possible[ex] = task["possible"]
        one, why = gradebook_run(student_dir, ["--exercise", ex], task_time_limit_s,
                                 test_timeout_s)
        grade.earned[ex] = one[0]["earned"] if one else 0.0
        if one is None:
            grade.notes.append(f"{ex}: {why}")
    return grade


def write_csv(grades: list[StudentGrade], out: Path) -> None:
    """One row per student: each task's points, the total, the possible total, the notes."""
    tasks = sorted({ex for g in grades for ex in g.possible},
                   key=lambda ex: tuple(int(part) for part in ex.split(".")))
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", *tasks, "total", "possible", "notes"])
        for g in grades:
            writer.writerow([g.student, *(g.earned.get(ex, 0.0) for ex in tasks), g.total,
                             sum(g.possible.get(ex, 0) for ex in tasks), "; ".join(g.notes)])


def grade_class(submissions: Path, out: Path, chapters: list[int] | None = None,
                time_limit_s: float = TIME_LIMIT_S, task_time_limit_s: float = TASK_TIME_LIMIT_S,
                test_timeout_s: float = TEST_TIMEOUT_S) -> list[StudentGrade]:
    """Grade every sub-folder of ``submissions`` and write ``out`` (CSV).

    Args:
        submissions: one folder per student, each a copy of ``exercises/``.
        out: the CSV to write.
        chapters: only these chapters' tasks (all when ``None``).
        time_limit_s: limit of a student's all-task process, s.
        task_time_limit_s: limit of one task's process when graded alone, s.
        test_timeout_s: limit of one test, s.

    Raises:
        UsageError: ``submissions`` is not a folder or holds none; ``out`` is not a ``.csv``
            file in an existing folder. All checked before any grading starts.
    """
    if not submissions.is_dir():
        raise UsageError(f"{submissions} is not a folder of student folders")
    students = sorted(p for p in submissions.iterdir() if p.is_dir())
    if not students:
        raise UsageError(f"{submissions} holds no student folders")
    if out.suffix != ".csv" or out.is_dir():
        raise UsageError(f"--out {out}: expected the name of a .csv file")
    if not out.parent.is_dir():
        raise UsageError(f"cannot write {out}: {out.parent} is not a folder")
    selections = ([["--chapter", str(c)] for c in chapters] if chapters else [["--all"]])
    grades = []
    for student in students:
        parts = [grade_student(student, sel, time_limit_s, task_time_limit_s, test_timeout_s)
                 for sel in selections]
        merged = StudentGrade(student.name)
        for part in parts:
            merged.earned.update(part.earned)
            merged.possible.update(part.possible)
            merged.notes += part.notes
        grades.append(merged)
        print(f"{student.name}: {merged.total:g} / {sum(merged.possible.values())}",
              file=sys.stderr)
    write_csv(grades, out)
    return grades


def grade_arguments(sub: Any) -> None:
    """Add ``grade`` to the CLI's subparsers ``sub``."""
    from lab.units import number

    p = sub.add_parser("grade", help="grade a folder of students' copies of exercises/ (CSV)")
    p.add_argument("submissions", type=Path, help="one sub-folder per student")
    p.add_argument("--out", type=Path, default=Path("grades.csv"), help="the CSV to write")
    p.add_argument("--time-limit", type=number(0, 86400, lo_open=True), default=TIME_LIMIT_S,
                   help=f"seconds for one student's tasks at once (default {TIME_LIMIT_S:g})")
    p.add_argument("--test-timeout", type=number(0, 3600, lo_open=True),
                   default=TEST_TIMEOUT_S, help=f"seconds per test (default {TEST_TIMEOUT_S:g})")


def cmd_grade(args: Any) -> None:
    """``distml-lab grade``: write the class's CSV."""
    grade_class(args.submissions, args.out, time_limit_s=args.time_limit,
                task_time_limit_s=min(args.time_limit, TASK_TIME_LIMIT_S),
                test_timeout_s=args.test_timeout)
