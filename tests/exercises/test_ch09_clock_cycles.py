"""Grading exercise 9.2: torchgpipe's clock cycles, against the literal table and the
simulator's."""

import itertools

import pytest

from simulator.pipeline.schedules.synchronous import clock_cycles as lab_clock_cycles
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch09, pytest.mark.ex09_2]

TODO = ("clock_cycles is not implemented yet: write it in exercises/ch09_clock_cycles.py "
        "(EXERCISE 9.2), then run `make grade EX=9.2` again")


def cycles(m, n):
    return [[tuple(pair) for pair in tick]
            for tick in call_or_fail("ch09_clock_cycles", "clock_cycles", TODO, m, n)]


def test_the_papers_table():
    assert cycles(4, 3) == [
        [(0, 0)],
        [(1, 0), (0, 1)],
        [(2, 0), (1, 1), (0, 2)],
        [(3, 0), (2, 1), (1, 2)],
        [(3, 1), (2, 2)],
        [(3, 2)],
    ]


def test_equal_to_the_simulators_clock():
    for m, n in itertools.product(range(1, 13), repeat=2):
        assert cycles(m, n) == lab_clock_cycles(m, n), f"m = {m}, n = {n}"


@pytest.mark.parametrize(("m", "n"), [(1, 5), (5, 1), (3, 3), (7, 4), (2, 9)])
def test_every_task_once_after_its_dependencies(m, n):
    tick_of = {}
    for k, tick in enumerate(cycles(m, n)):
        for pair in tick:
            assert pair not in tick_of, f"{pair} runs twice"
            tick_of[pair] = k
    assert set(tick_of) == set(itertools.product(range(m), range(n)))
    for (i, j), k in tick_of.items():
        assert j == 0 or tick_of[i, j - 1] < k
        assert i == 0 or tick_of[i - 1, j] < k
