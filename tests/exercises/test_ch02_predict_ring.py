"""Grading exercise 2.5: the ring all-reduce predicted from α, β, γ, then measured.

Run with ``make grade EX=2.5`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex02_5
tests/exercises`` (the reference answer).

The measured part calibrates this machine quickly and times the lab's real ring in the same
launch (:mod:`tests.exercises.measured`), one launch per world; the tolerance is the lab's own
error in that run (the larger of its simulated twin's on the textbook cluster and its closed
form's, from the same calibration; :func:`tests.exercises.measured.judge`).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.twins import get_twin
from simulator.collectives.all_reduce import ring_all_reduce_cost
from tests.exercises.grading import call_or_fail
from tests.exercises.measured import MiB, judge, primitives, textbook

pytestmark = [pytest.mark.ch02, pytest.mark.ex02_5]

TODO = ("predict_ring_all_reduce_s is not implemented yet: write it in "
        "exercises/ch02_predict_ring.py (EXERCISE 2.5: the ring's steps, bytes sent and bytes "
        "reduced per rank, priced by α, β and γ), then run `make grade EX=2.5` again")
SIZES = (1 * MiB, 4 * MiB, 16 * MiB)
WORLDS = (2, 3)


def predict(p, n, alpha, beta, gamma):
    """The prediction under test (``DISTML_IMPL`` picks yours or the reference)."""
    return call_or_fail("ch02_predict_ring", "predict_ring_all_reduce_s", TODO, p, n, alpha,
                        beta, gamma)


@given(p=st.integers(2, 1024), n=st.floats(1.0, 2.0**34), alpha=st.floats(1e-7, 1e-3),
       bandwidth=st.floats(1e6, 1e12), gamma=st.sampled_from([0.0]) | st.floats(1e-13, 1e-8))
def test_derive_your_formula_is_the_simulators_closed_form(p, n, alpha, bandwidth, gamma):
    got = predict(p, n, alpha, 1 / bandwidth, gamma)
    expected = ring_all_reduce_cost(p, n, alpha, 1 / bandwidth, gamma)
    assert isinstance(got, float)
    assert got == pytest.approx(expected, rel=1e-9), (
        f"p={p}, n={n:.6g} B, α={alpha:.3g} s, β={1 / bandwidth:.3g} s/B, γ={gamma:.3g} s/B: "
        f"yours {got:.6g} s, the ring's closed form {expected:.6g} s")


def test_derive_each_term_on_its_own():
    # α alone: the steps; β alone: the bytes a rank sends; γ alone: the bytes it adds.
    assert predict(4, 2**20, 1.0, 0.0, 0.0) == pytest.approx(6.0), "latency: steps × α"
    assert predict(4, 2**20, 0.0, 1.0, 0.0) == pytest.approx(1.5 * 2**20), "bytes sent × β"
    assert predict(4, 2**20, 0.0, 0.0, 1.0) == pytest.approx(0.75 * 2**20), "bytes added × γ"


def test_derive_a_single_rank_costs_nothing():
    assert predict(1, 2**20, 20e-6, 1 / 5e9, 1e-10) == 0.0


@pytest.mark.parametrize("p", WORLDS)
def test_measure_your_prediction_is_as_close_as_the_labs(p):
    predict(p, 2**20, 20e-6, 1 / 5e9, 1e-10)  # a stub fails here, before anything launches
    twin = get_twin("all_reduce.ring")
    measured = primitives(p, twin.name, SIZES)
    # every step of the ring has p messages in flight at once, one per rank
    alpha, beta, gamma = measured.alpha_s, measured.busy_beta_s_per_B(p), measured.gamma_s_per_B
    cluster = textbook(measured, p)
    lab = {"the lab's simulated twin": [twin.simulate(cluster, n, trace=False).makespan_s
                                        for n in SIZES],
           "its closed form": [ring_all_reduce_cost(p, n, alpha, beta, gamma) for n in SIZES]}
    yours = [predict(p, n, alpha, beta, gamma) for n in SIZES]
    judge([f"{n // MiB} MiB" for n in SIZES], yours, lab, measured.twin_s,
          f"ring all-reduce at p={p} (calibrated {measured.describe(p)})")
