"""Grading exercise 18.3: a MultiWorkerMirroredStrategy step predicted in closed form,
against the simulated twin.

Run with ``make grade EX=18.3`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex18_3
tests/exercises`` (the reference answer).
"""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology
from simulator.data_parallel import TableProfile
from simulator.tf_distribute import simulate_multi_worker
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch18, pytest.mark.ex18_3]

TODO = ("predict_multi_worker_step_s is not implemented yet: write it in "
        "exercises/ch18_predict_step.py (EXERCISE 18.3), then run `make grade EX=18.3` again")


def predict(*args):
    return call_or_fail("ch18_predict_step", "predict_multi_worker_step_s", TODO, *args)


@st.composite
def profiles(draw):
    """A one-thread profile at 1, 8 and 32 rows, times growing with the rows, s."""
    def column(scale):
        a = draw(st.floats(0.1, 1.0)) * scale
        return (a, a * draw(st.floats(2, 10)), a * draw(st.floats(12, 40)))

    return TableProfile((1, 8, 32), column(1e-4), column(2e-4), column(1e-5),
                        draw(st.floats(1e-5, 1e-3)))


def simulated(profile, nbytes, batch, p, alpha, beta, memcpy, reduce, speed):
    device = Device("grading", 1e12, 1e10, math.inf, reduce_Bps=reduce, memcpy_Bps=memcpy)
    cluster = Cluster.homogeneous("grading", device, Topology.fully_connected(
        p, Link(alpha, 1 / beta, "none")))
    return simulate_multi_worker(cluster, profile, nbytes, batch, cores=64, speed=speed).step_s


@given(profiles(), st.integers(1, 2**18).map(lambda e: 4 * e), st.integers(1, 40),
       st.integers(1, 6), st.floats(0, 1e-4), st.floats(1e-11, 1e-8), st.floats(1e9, 2e10),
       st.floats(1e9, 2e10), st.floats(0.3, 1.0))
def test_the_prediction_equals_the_simulated_step(profile, nbytes, batch, p, alpha, beta,
                                                  memcpy, reduce, speed):
    args = (profile, nbytes, batch, p, alpha, beta, memcpy, reduce, speed)
    assert predict(*args) == pytest.approx(simulated(*args), rel=1e-3), (
        f"{p} workers, {batch} rows, {nbytes} B")


@pytest.mark.parametrize(("batch", "p"), [(8, 1), (7, 3), (5, 4), (32, 4)])
def test_with_free_links_the_step_is_the_slowest_slice_and_the_update(batch, p):
    profile = TableProfile((1, 8, 32), (1e-4, 6e-4, 2e-3), (2e-4, 1e-3, 5e-3),
                           (1e-5, 3e-5, 1e-4), 4e-4)
    rows = -(-batch // p)
    expected = (profile.forward_s(rows) + profile.loss_s(rows) + profile.backward_s(rows)
                + profile.step_s())
    got = predict(profile, 4096, batch, p, 0.0, 1e-30, 1e30, 1e30, 1.0)
    assert got == pytest.approx(expected, rel=1e-9)


def test_one_worker_pays_no_all_reduce():
    profile = TableProfile((1, 8), (1e-4, 5e-4), (2e-4, 1e-3), (1e-5, 2e-5), 3e-4)
    with_links = predict(profile, 4 * 10**6, 8, 1, 1.0, 1.0, 1e9, 1e9, 0.5)
    free = predict(profile, 4 * 10**6, 8, 1, 0.0, 1e-30, 1e9, 1e30, 0.5)
    assert with_links == pytest.approx(free, rel=1e-12)
