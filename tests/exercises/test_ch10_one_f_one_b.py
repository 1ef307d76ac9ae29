"""Grading exercise 10.1: one_f_one_b, literally and by its properties.

Run with ``make grade CH=10`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch10
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.pipeline.schedules import Action, in_flight, makespan, pipeline_time, timeline
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch10, pytest.mark.ex10_1]

TODO = ("one_f_one_b is not implemented yet: write it in exercises/ch10_one_f_one_b.py "
        "(EXERCISE 10.1: warm-up, steady one-forward-one-backward, cool-down), then run "
        "`make grade CH=10` again")


def schedule(p, m):
    """Your schedule as the simulator's Actions (``DISTML_IMPL`` picks yours or the
    reference)."""
    result = call_or_fail("ch10_one_f_one_b", "one_f_one_b", TODO, p, m)
    assert len(result) == p, f"one_f_one_b({p}, {m}) has {len(result)} stages, not {p}"
    return [[Action(kind, i) for kind, i in actions] for actions in result]


def test_the_textbook_table_for_four_stages_and_eight_microbatches():
    got = [" ".join(f"{a.kind}{a.microbatch}" for a in actions) for actions in schedule(4, 8)]
    assert got == [
        "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7",
    ]


@given(p=st.integers(1, 8), m=st.integers(1, 24))
def test_each_action_once_dependencies_met_at_most_p_minus_r_in_flight(p, m):
    s = schedule(p, m)
    for r, actions in enumerate(s):
        assert sorted((a.kind, a.microbatch) for a in actions) == sorted(
            (k, i) for k in "FB" for i in range(m)), (
            f"p={p}, m={m}: stage {r} must run F and B of each micro-batch exactly once")
        assert in_flight(actions) <= p - r, (
            f"p={p}, m={m}: stage {r} holds {in_flight(actions)} micro-batches at once; 1F1B "
            f"holds at most {p - r}")
    try:
        timeline(s)
    except ValueError as exc:
        pytest.fail(f"p={p}, m={m}: {exc}", pytrace=False)


@given(p=st.integers(1, 6), m=st.integers(1, 16), tf=st.floats(0.1, 2), tb=st.floats(0.1, 4))
def test_simulated_step_takes_m_plus_p_minus_1_ticks(p, m, tf, tb):
    assert makespan(timeline(schedule(p, m), tf, tb)) == pytest.approx(
        pipeline_time(p, m, tf, tb)), f"p={p}, m={m}: your schedule leaves extra idle time"
