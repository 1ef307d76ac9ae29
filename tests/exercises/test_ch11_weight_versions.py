"""Grading exercise 11.1: stashed_versions against p − r and the simulator's PipeDream.

Run with ``make grade CH=11`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch11
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.pipeline.schedules import pipedream_async
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch11, pytest.mark.ex11_1]

TODO = ("stashed_versions is not implemented yet: write it in "
        "exercises/ch11_weight_versions.py (EXERCISE 11.1: replay 1F1B, count the versions "
        "alive), then run `make grade CH=11` again")


def versions(p, m):
    """The function under test (``DISTML_IMPL`` picks yours or the reference)."""
    return call_or_fail("ch11_weight_versions", "stashed_versions", TODO, p, m)


@pytest.mark.parametrize("p", range(1, 9))
def test_a_full_pipeline_stashes_p_minus_r_versions(p):
    assert versions(p, 3 * p) == [p - r for r in range(p)]


@given(p=st.integers(1, 7), m=st.integers(1, 20))
def test_same_counts_as_the_simulated_pipedream(p, m):
    assert versions(p, m) == pipedream_async(p, m).stashed, (
        f"p={p}, m={m}: the simulator's PipeDream holds {pipedream_async(p, m).stashed}")
