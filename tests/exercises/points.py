"""The points of every exercise: the grading table the banners quote.

Each exercise ``N.k`` is worth ``POINTS["N.k"]`` points, earned in proportion to its tests that
pass (a test that is skipped counts for nothing either way). Its tests carry the marker
``exNN_k`` (:func:`marker`) and the chapter's marker ``chNN``. The banner of each stub under
``exercises/`` says ``Points: P``; ``tests/exercises/test_points.py`` checks that the two agree.
Harder exercises (an algorithm on real processes, a hook) are worth more than a formula.
"""

from __future__ import annotations

import re

POINTS: dict[str, int] = {
    "1.1": 8, "1.2": 6, "1.3": 4,
    "2.1": 10, "2.2": 10, "2.3": 4, "2.4": 6, "2.5": 8,
    "3.1": 4, "3.2": 6, "3.3": 4, "3.4": 8,
    "4.1": 6, "4.2": 6, "4.3": 4,
    "5.1": 6, "5.2": 4, "5.3": 6,
    "6.1": 10, "6.2": 8, "6.3": 6, "6.4": 20,
    "7.1": 8, "7.2": 6, "7.3": 4,
    "8.1": 4, "8.2": 6, "8.3": 6, "8.4": 8,
    "9.1": 8, "9.2": 6, "9.3": 6,
    "10.1": 8, "10.2": 6, "10.3": 4, "10.4": 20,
    "11.1": 6, "11.2": 4, "11.3": 6,
    "12.1": 4, "12.2": 8, "12.3": 8,
    "13.1": 4, "13.2": 8, "13.3": 4,
    "14.1": 6, "14.2": 10, "14.3": 6, "14.4": 20,
    "15.1": 4, "15.2": 4, "15.3": 4,
    "16.1": 6, "16.2": 6, "16.3": 6,
    "17.1": 8, "17.2": 6, "17.3": 6,
    "18.1": 4, "18.2": 8, "18.3": 6,
    "19.1": 6, "19.2": 6, "19.3": 5,
    "20.1": 10, "20.2": 6, "20.3": 6,
    "21.1": 8, "21.2": 6, "21.3": 6,
    "22.1": 8, "22.2": 8, "22.3": 6,
    "23.1": 8, "23.2": 6, "23.3": 6,
}

EXERCISE = re.compile(r"^(\d{1,2})\.(\d+)$")
MARKER = re.compile(r"^ex(\d{2})_(\d+)$")


def marker(exercise: str) -> str:
    """``"6.1"`` → ``"ex06_1"``: the pytest marker of an exercise's tests.

    Raises:
        ValueError: not of the form ``N.k``.
    """
    match = EXERCISE.match(exercise)
    if not match:
        raise ValueError(f"exercise {exercise!r}: expected CHAPTER.TASK, such as 6.1")
    return f"ex{int(match[1]):02d}_{match[2]}"


def exercise(marker_name: str) -> str | None:
    """``"ex06_1"`` → ``"6.1"``; ``None`` for a marker that names no exercise."""
    match = MARKER.match(marker_name)
    return f"{int(match[1])}.{match[2]}" if match else None


def chapter(exercise_id: str) -> int:
    """``"6.1"`` → 6."""
    return int(exercise_id.split(".")[0])


def order(exercise_id: str) -> tuple[int, int]:
    """Sort key: 2.4 before 10.1."""
    ch, task = exercise_id.split(".")
    return int(ch), int(task)
