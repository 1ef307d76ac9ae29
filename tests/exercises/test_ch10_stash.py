"""Grading exercise 10.3: 1F1B's stash per stage, against the simulator's schedule."""

import pytest

from simulator.pipeline.schedules.critical_path import in_flight
from simulator.pipeline.schedules.synchronous import one_f_one_b
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch10, pytest.mark.ex10_3]

TODO = ("stashed_microbatches is not implemented yet: write it in exercises/ch10_stash.py "
        "(EXERCISE 10.3), then run `make grade EX=10.3` again")


def stash(p, m, s):
    return call_or_fail("ch10_stash", "stashed_microbatches", TODO, p, m, s)


@pytest.mark.parametrize("p", range(1, 11))
def test_equal_to_the_simulated_1f1b_schedule(p):
    for m in range(1, 21):
        expected = [in_flight(actions) for actions in one_f_one_b(p, m)]
        got = [stash(p, m, s) for s in range(p)]
        assert got == expected, f"p = {p}, m = {m}: you {got}, the schedule {expected}"
