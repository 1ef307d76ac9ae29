"""Grading exercise 8.1: bubble_fraction, both definitions, and the simulated idle share.

Run with ``make grade CH=08`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch08
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.pipeline.schedules import gpipe, idle_fraction, one_f_one_b, timeline
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch08, pytest.mark.ex08_1]

TODO = ("bubble_fraction is not implemented yet: write it in exercises/ch08_bubble.py "
        "(EXERCISE 8.1: idle ticks over all ticks, or over busy ticks), then run "
        "`make grade CH=08` again")


def bubble(p, m, relative_to="total"):
    """The function under test (``DISTML_IMPL`` picks yours or the reference)."""
    return call_or_fail("ch08_bubble", "bubble_fraction", TODO, p, m, relative_to)


@given(p=st.integers(1, 32), m=st.integers(1, 256))
def test_both_definitions_follow_the_references(p, m):
    total, ideal = bubble(p, m, "total"), bubble(p, m, "ideal")
    assert total == pytest.approx((p - 1) / (m + p - 1)), (
        f"p={p}, m={m}: the idle share of the total time is (p−1)/(m+p−1), you gave {total}")
    assert ideal == pytest.approx((p - 1) / m), (
        f"p={p}, m={m}: the bubble over the ideal time is (p−1)/m, you gave {ideal}")


@given(p=st.integers(1, 6), m=st.integers(1, 12), tf=st.floats(0.1, 2), tb=st.floats(0.1, 4))
def test_simulated_idle_share_equals_your_total_bubble(p, m, tf, tb):
    for name, schedule in (("GPipe", gpipe(p, m)), ("1F1B", one_f_one_b(p, m))):
        simulated = idle_fraction(timeline(schedule, tf, tb))
        assert bubble(p, m) == pytest.approx(simulated), (
            f"{name}, p={p}, m={m}: the simulated stages idle {simulated:.4f} of the time")


def test_unknown_definition_raises_value_error():
    with pytest.raises(ValueError):
        bubble(4, 8, "busy")
