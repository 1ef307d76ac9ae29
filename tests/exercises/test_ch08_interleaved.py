"""Grading exercise 8.3: the pipeline's step time, against the simulator's closed form and the
critical path of its schedules."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.pipeline.schedules.bubble import pipeline_time
from simulator.pipeline.schedules.critical_path import makespan, timeline
from simulator.pipeline.schedules.synchronous import gpipe, interleaved_1f1b, one_f_one_b
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch08, pytest.mark.ex08_3]

TODO = ("pipeline_step_time is not implemented yet: write it in exercises/ch08_interleaved.py "
        "(EXERCISE 8.3), then run `make grade EX=8.3` again")


def step(p, m, tf, tb, v=1):
    return call_or_fail("ch08_interleaved", "pipeline_step_time", TODO, p, m, tf, tb, v)


@given(p=st.integers(1, 64), m=st.integers(1, 256), v=st.integers(1, 8),
       tf=st.floats(1e-4, 10), tb=st.floats(1e-4, 10))
def test_equal_to_the_simulators_closed_form(p, m, v, tf, tb):
    assert step(p, m, tf, tb, v) == pytest.approx(pipeline_time(p, m, tf, tb, v), rel=1e-9)


@pytest.mark.parametrize("schedule", [gpipe, one_f_one_b])
@pytest.mark.parametrize(("p", "m"), [(1, 3), (2, 4), (4, 8), (4, 3), (3, 7)])
def test_equal_to_the_critical_path(schedule, p, m):
    simulated = makespan(timeline(schedule(p, m), 1.0, 2.0))
    assert step(p, m, 1.0, 2.0) == pytest.approx(simulated, rel=1e-9)


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (2, 4, 3), (4, 4, 4)])
def test_equal_to_the_interleaved_critical_path(p, m, v):
    simulated = makespan(timeline(interleaved_1f1b(p, m, v), 1.0 / v, 2.0 / v))
    got = step(p, m, 1.0, 2.0, v)
    assert got == pytest.approx(simulated, rel=1e-9), (
        f"p = {p}, m = {m}, v = {v}, t_f = 1, t_b = 2: you {got}, the schedule {simulated}")
