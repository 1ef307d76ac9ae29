"""Grading exercise 1.3: training days, against simulator.transformer.training_days."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.transformer import training_days as lab_training_days
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch01, pytest.mark.ex01_3]

TODO = ("training_days is not implemented yet: write it in exercises/ch01_training_days.py "
        "(EXERCISE 1.3), then run `make grade EX=1.3` again")


def days(tokens, params, gpus, flops):
    return call_or_fail("ch01_training_days", "training_days", TODO, tokens, params, gpus, flops)


@given(tokens=st.floats(1e6, 1e13), params=st.floats(1e6, 1e13), gpus=st.integers(1, 10**5),
       flops=st.floats(1e11, 1e16))
def test_equal_to_the_simulators_formula(tokens, params, gpus, flops):
    expected = lab_training_days(tokens, params, gpus, flops)
    assert days(tokens, params, gpus, flops) == pytest.approx(expected, rel=1e-9)


def test_gpt3_takes_about_a_month():
    got = days(300e9, 175e9, 1024, 140e12)
    assert got == pytest.approx(lab_training_days(300e9, 175e9, 1024, 140e12), rel=1e-9)
    assert 25 < got < 40, f"GPT-3 on 1024 GPUs: {got:.1f} days"
