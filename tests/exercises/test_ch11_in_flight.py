"""Grading exercise 11.3: the peak stash, against the simulator's schedules."""

import pytest

from simulator.pipeline.schedules.critical_path import in_flight
from simulator.pipeline.schedules.synchronous import gpipe, interleaved_1f1b, one_f_one_b
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch11, pytest.mark.ex11_3]

TODO = ("peak_stash is not implemented yet: write it in exercises/ch11_in_flight.py "
        "(EXERCISE 11.3), then run `make grade EX=11.3` again")


def peak(actions):
    triples = [(a.kind, a.microbatch, a.chunk) for a in actions]
    return call_or_fail("ch11_in_flight", "peak_stash", TODO, triples)


SCHEDULES = [(gpipe, 4, 6), (gpipe, 1, 3), (one_f_one_b, 4, 8), (one_f_one_b, 5, 3),
             (one_f_one_b, 3, 1), (lambda p, m: interleaved_1f1b(p, m, 2), 4, 8),
             (lambda p, m: interleaved_1f1b(p, m, 3), 2, 6)]


@pytest.mark.parametrize(("schedule", "p", "m"), SCHEDULES)
def test_equal_to_the_simulators_in_flight(schedule, p, m):
    ranks = schedule(p, m)
    got = [peak(actions) for actions in ranks]
    expected = [in_flight(actions) for actions in ranks]
    assert got == expected, f"p = {p}, m = {m}: you {got}, the simulator {expected}"


def test_nothing_to_stash():
    assert peak([]) == 0


@pytest.mark.parametrize(("p", "m"), [(4, 8), (4, 2), (6, 6)])
def test_1f1b_and_gpipe_in_closed_form(p, m):
    assert [peak(a) for a in one_f_one_b(p, m)] == [min(m, p - s) for s in range(p)]
    assert [peak(a) for a in gpipe(p, m)] == [m] * p
