"""Grading exercise 5.3: one step's all-reduce time, against the simulator's buckets and its
ring all-reduce closed form."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.all_reduce import ring_all_reduce_cost
from simulator.ddp import assign_buckets
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch05, pytest.mark.ex05_3]

TODO = ("step_all_reduce_time is not implemented yet: write it in "
        "exercises/ch05_all_reduce_time.py (EXERCISE 5.3), then run `make grade EX=5.3` again")


def step_time(sizes, cap, first, p, alpha, beta):
    return call_or_fail("ch05_all_reduce_time", "step_all_reduce_time", TODO,
                        sizes, cap, first, p, alpha, beta)


@given(sizes=st.lists(st.integers(0, 10**7), min_size=1, max_size=40),
       cap=st.integers(1, 10**7), first=st.integers(1, 10**7), p=st.integers(1, 64),
       alpha=st.floats(0, 1e-3), bandwidth=st.floats(1e6, 1e12))
def test_equal_to_the_simulators_buckets_and_ring(sizes, cap, first, p, alpha, bandwidth):
    beta = 1 / bandwidth
    expected = sum(ring_all_reduce_cost(p, sum(sizes[i] for i in b), alpha, beta)
                   for b in assign_buckets(sizes, cap, first))
    got = step_time(sizes, cap, first, p, alpha, beta)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-15), (
        f"sizes {sizes}, caps {cap}/{first}, p = {p}: you {got}, expected {expected}")


def test_smaller_buckets_pay_more_latency():
    sizes, p, alpha, beta = [2**20] * 8, 4, 50e-6, 1 / 1e9
    few = step_time(sizes, 8 * 2**20, 8 * 2**20, p, alpha, beta)
    many = step_time(sizes, 2**20, 2**20, p, alpha, beta)
    assert many - few == pytest.approx(7 * 2 * (p - 1) * alpha, rel=1e-9)
