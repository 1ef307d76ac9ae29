"""Grading exercise 6.3: the exposed communication in closed form, against the recurrence."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.figures.data_parallel import exposed_recurrence
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch06, pytest.mark.ex06_3]

TODO = ("exposed_communication is not implemented yet: write it in exercises/ch06_exposed.py "
        "(EXERCISE 6.3), then run `make grade EX=6.3` again")


def exposed(b, n, backward, a, beta):
    return call_or_fail("ch06_exposed", "exposed_communication", TODO, b, n, backward, a, beta)


@given(k=st.integers(1, 400), bucket=st.integers(1, 2**26), backward=st.floats(1e-3, 2.0),
       a=st.floats(0, 1e-2), bandwidth=st.floats(1e7, 1e11))
def test_equal_to_the_recurrence(k, bucket, backward, a, bandwidth):
    n = k * bucket
    expected = exposed_recurrence(bucket, n, backward, a, 1 / bandwidth)
    got = exposed(bucket, n, backward, a, 1 / bandwidth)
    assert got == pytest.approx(expected, rel=1e-6, abs=1e-12), (
        f"N = {n} B in {k} buckets, T_b = {backward} s, a = {a} s, 1/β' = {bandwidth} B/s: "
        f"you {got} s, the recurrence {expected} s")


def test_the_textbooks_resnet50_optimum():
    n, backward, a, beta = 102.4e6, 0.2, 0.42e-3, 1.4e-9
    b_star = a / (backward / n - beta)
    b = n / math.floor(n / b_star)  # whole buckets, on the safe (larger) side of b*
    assert exposed(b, n, backward, a, beta) == pytest.approx(1.48e-3, rel=0.02)
