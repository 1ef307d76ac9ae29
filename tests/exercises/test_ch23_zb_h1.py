"""Grading exercise 23.1: zb_h1, literally, against the simulator's schedule, and timed.

Run with ``make grade EX=23.1`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex23_1
tests/exercises`` (the reference answer).
"""

import pytest

from simulator.pipeline.schedules import Action
from simulator.pipeline.schedules.split_backward import (
    check_split,
    idle_share,
    in_flight_split,
    timeline_split,
)
from simulator.pipeline.schedules.zero_bubble import zb_h1 as lab_zb_h1
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch23, pytest.mark.ex23_1]

TODO = ("zb_h1 is not implemented yet: write it in exercises/ch23_zb_h1.py (EXERCISE 23.1: "
        "1F1B with I and W split, stage r holding r weight gradients back), then run "
        "`make grade EX=23.1` again")


def schedule(p, m):
    result = call_or_fail("ch23_zb_h1", "zb_h1", TODO, p, m)
    assert len(result) == p, f"zb_h1({p}, {m}) has {len(result)} stages, not {p}"
    return [[Action(kind, i) for kind, i in actions] for actions in result]


def orders(s):
    return [" ".join(f"{a.kind}{a.microbatch}" for a in actions) for actions in s]


def test_the_textbook_orders_for_three_stages_and_four_microbatches():
    assert orders(schedule(3, 4)) == [
        "F0 F1 F2 I0 W0 F3 I1 W1 I2 W2 I3 W3",
        "F0 F1 I0 F2 I1 W0 F3 I2 W1 I3 W2 W3",
        "F0 I0 F1 I1 F2 I2 W0 F3 I3 W1 W2 W3",
    ]


def test_the_orders_for_four_stages_and_eight_microbatches():
    assert orders(schedule(4, 8)) == [
        "F0 F1 F2 F3 I0 W0 F4 I1 W1 F5 I2 W2 F6 I3 W3 F7 I4 W4 I5 W5 I6 W6 I7 W7",
        "F0 F1 F2 I0 F3 I1 W0 F4 I2 W1 F5 I3 W2 F6 I4 W3 F7 I5 W4 I6 W5 I7 W6 W7",
        "F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 F6 I5 W3 F7 I6 W4 I7 W5 W6 W7",
        "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 F7 I7 W4 W5 W6 W7",
    ]


@pytest.mark.parametrize("p", range(1, 7))
def test_every_size_is_valid_and_equals_the_lab_schedule(p):
    for m in range(1, 13):
        s = schedule(p, m)
        try:
            check_split(s)
            timeline_split(s)
        except ValueError as exc:
            pytest.fail(f"p={p}, m={m}: {exc}", pytrace=False)
        want = lab_zb_h1(p, m)
        for r in range(p):
            assert s[r] == want[r], (f"p={p}, m={m}, stage {r}: expected {orders(want)[r]}, "
                                     f"got {orders(s)[r]}")


@pytest.mark.parametrize(("p", "m"), [(2, 2), (3, 5), (4, 8), (5, 16)])
def test_unit_times_leave_p_minus_1_units_of_bubble_at_1f1b_memory(p, m):
    s = schedule(p, m)
    spans = timeline_split(s)
    end = max(row[-1][1] for row in spans)
    assert end == pytest.approx(3 * m + p - 1), (
        f"p={p}, m={m}: with F = I = W = 1 ZB-H1 takes 3m + p − 1 = {3 * m + p - 1} units; "
        f"yours takes {end:g}")
    assert idle_share(spans) == pytest.approx((p - 1) / (3 * m + p - 1))
    peaks = [in_flight_split(actions) for actions in s]
    assert max(peaks) <= p, f"p={p}, m={m}: {peaks} micro-batches in flight; at most p"
