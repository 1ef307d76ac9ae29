"""Grading exercise 23.2: ZB-H1's bubble and step time, literally and against the lab's
schedule placed in time.

Run with ``make grade EX=23.2`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex23_2
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from simulator.pipeline.schedules.split_backward import timeline_split
from simulator.pipeline.schedules.zero_bubble import zb_h1
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch23, pytest.mark.ex23_2]

TODO = ("zb_h1_bubble / zb_h1_step are not implemented yet: write them in "
        "exercises/ch23_zb_bubble.py (EXERCISE 23.2), then run `make grade EX=23.2` again")


def bubble(p, tf, ti, tw):
    return call_or_fail("ch23_zb_bubble", "zb_h1_bubble", TODO, p, tf, ti, tw)


def step(p, m, tf, ti, tw):
    return call_or_fail("ch23_zb_bubble", "zb_h1_step", TODO, p, m, tf, ti, tw)


def test_four_stages_eight_microbatches_unit_times():
    assert bubble(4, 1.0, 1.0, 1.0) == pytest.approx(3.0), "(p − 1)(T_F + T_I − T_W) = 3"
    assert step(4, 8, 1.0, 1.0, 1.0) == pytest.approx(27.0), "24 units of work + 3 (1F1B: 33)"
    assert bubble(1, 1.0, 2.0, 0.5) == pytest.approx(0.0), "one stage has no bubble"


def test_a_weight_gradient_longer_than_the_input_gradient_stops_at_the_start_up():
    assert bubble(4, 1.0, 1.0, 2.0) == pytest.approx(3.0), (
        "T_W > T_I: the last stage's p W's are the longer branch; the bubble is (p − 1)T_F")
    assert step(4, 8, 1.0, 1.0, 2.0) == pytest.approx(35.0)
    assert bubble(3, 0.5, 0.25, 1.0) == pytest.approx(1.0)


@given(p=st.integers(1, 6), extra=st.integers(0, 8),
       times=st.tuples(*[st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0, 3.0])] * 3))
def test_equal_to_the_schedule_placed_in_time(p, extra, times):
    tf, ti, tw = times
    assume(ti <= tf or tw <= tf)  # where the closed form is exact
    m = p + extra
    spans = timeline_split(zb_h1(p, m), "loop", tf, ti, tw)
    end = max(row[-1][1] for row in spans)
    case = f"p={p}, m={m}, T_F={tf}, T_I={ti}, T_W={tw}"
    assert step(p, m, tf, ti, tw) == pytest.approx(end), (
        f"{case}: the schedule placed in time takes {end:g} s")
    assert bubble(p, tf, ti, tw) == pytest.approx(end - m * (tf + ti + tw)), (
        f"{case}: the bubble is the step minus the work of a stage")
