"""Grading exercise 8.2: choose_microbatches against the simulated pipeline's peak memory.

Run with ``make grade CH=08`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch08
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology
from simulator.pipeline import simulate_pipeline, uniform_profile
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch08, pytest.mark.ex08_2]

TODO = ("choose_microbatches is not implemented yet: write it in "
        "exercises/ch08_microbatches.py (EXERCISE 8.2: the smallest divisor m of the batch "
        "whose peak activation memory fits), then run `make grade CH=08` again")


def choose(*args):
    """The function under test (``DISTML_IMPL`` picks yours or the reference)."""
    return call_or_fail("ch08_microbatches", "choose_microbatches", TODO, *args)


def simulated_peak(batch, p, act, inp, m, schedule, checkpoint):
    """The largest peak activation memory over the stages of the simulated pipeline, bytes."""
    samples = batch // m
    link = Link(0.0, 1e12, "none")
    cluster = Cluster.homogeneous("grading", Device("grading", 1e12, 1e12, 1e15),
                                  Topology.fully_connected(p, link))
    profile = uniform_profile(p, 1.0, 2.0, activation_bytes=samples * act,
                              output_bytes=samples * inp)
    result = simulate_pipeline(cluster, profile, [1] * p, m, schedule, checkpoint,
                               input_bytes=samples * inp, trace=False)
    return max(result.peak_activation_bytes)


@given(batch=st.sampled_from([1, 6, 8, 12, 16, 24]), p=st.integers(1, 4),
       act=st.integers(1, 100), inp=st.integers(1, 20), budget=st.integers(1, 3000),
       schedule=st.sampled_from(["gpipe", "1f1b"]),
       checkpoint=st.sampled_from(["never", "always"]))
def test_smallest_divisor_that_fits_in_the_simulated_pipeline(batch, p, act, inp, budget,
                                                              schedule, checkpoint):
    answer = choose(batch, p, act, inp, budget, schedule, checkpoint)
    fits = [m for m in range(1, batch + 1) if batch % m == 0
            and simulated_peak(batch, p, act, inp, m, schedule, checkpoint) <= budget]
    expected = fits[0] if fits else None
    assert answer == expected, (
        f"N={batch}, p={p}, {act} B/sample activations, {inp} B/sample input, budget "
        f"{budget} B, {schedule}, checkpoint={checkpoint}: you chose {answer}, the simulator "
        f"says {expected}")
