"""Grading exercise 23.3: peak in-flight activations, counted and by formula, against the
simulator's in_flight_split on the lab's schedules.

Run with ``make grade EX=23.3`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex23_3
tests/exercises`` (the reference answer).
"""

import pytest

from simulator.pipeline.schedules import Action, one_f_one_b
from simulator.pipeline.schedules.split_backward import in_flight_split
from simulator.pipeline.schedules.zero_bubble import dualpipe_v, zb_h1, zb_v
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch23, pytest.mark.ex23_3]

TODO = ("in_flight / peak_in_flight are not implemented yet: write them in "
        "exercises/ch23_in_flight.py (EXERCISE 23.3), then run `make grade EX=23.3` again")
LAB = {"1f1b": one_f_one_b, "zb_h1": zb_h1, "zbv": zb_v}


def counted(actions):
    return call_or_fail("ch23_in_flight", "in_flight", TODO,
                        [(a.kind, a.microbatch, a.chunk) for a in actions])


def formula(name, p, m, r):
    return call_or_fail("ch23_in_flight", "peak_in_flight", TODO, name, p, m, r)


def test_an_input_gradient_frees_nothing():
    actions = [Action("F", 0), Action("F", 1), Action("I", 0), Action("F", 2), Action("W", 0),
               Action("I", 1), Action("W", 1), Action("F", 3)]
    assert counted(actions) == 3, "I keeps the activations that W needs: 3 live after F2"
    fused = [Action("F", 0), Action("B", 0), Action("F", 1), Action("F", 0, 1), Action("B", 1)]
    assert counted(fused) == 2, "a fused B frees; the same micro-batch on chunk 1 is its own"


@pytest.mark.parametrize("p", range(1, 6))
def test_counting_equals_the_simulator_on_every_schedule(p):
    for m in (1, 2, p, 2 * p, 2 * p + 3):
        schedules = {"1F1B": one_f_one_b(p, m), "ZB-H1": zb_h1(p, m), "ZB-V": zb_v(p, m)}
        if m >= 2 * p:
            schedules["DualPipe-V"] = dualpipe_v(p, m)
        for name, s in schedules.items():
            got = [counted(actions) for actions in s]
            want = [in_flight_split(actions) for actions in s]
            assert got == want, f"{name}, p={p}, m={m}: expected {want} per rank, got {got}"


@pytest.mark.parametrize("name", ["1f1b", "zb_h1", "zbv"])
def test_formula_equals_the_lab_schedules(name):
    for p in range(1, 7):
        for m in range(2 * p - 1 if name == "zbv" else 1, 13):
            want = [in_flight_split(actions) for actions in LAB[name](p, m)]
            got = [formula(name, p, m, r) for r in range(p)]
            assert got == want, f"{name}, p={p}, m={m}: expected {want} per rank, got {got}"
