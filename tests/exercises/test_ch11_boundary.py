"""Grading exercise 11.2: the cost of a stage boundary, against the simulator's planner."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.pipeline import LayerProfile
from simulator.pipeline.planner import boundary_time as lab_boundary_time
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch11, pytest.mark.ex11_2]

TODO = ("boundary_time is not implemented yet: write it in exercises/ch11_boundary.py "
        "(EXERCISE 11.2), then run `make grade EX=11.2` again")


@given(nbytes=st.integers(0, 2**32), bandwidth=st.floats(1e6, 1e12), latency=st.floats(0, 1e-3),
       duplex=st.booleans())
def test_equal_to_the_planners_boundary_time(nbytes, bandwidth, latency, duplex):
    profile = [LayerProfile("0", 1.0, 2.0, nbytes, 0)]
    expected = lab_boundary_time(profile, 0, bandwidth, latency, duplex)
    got = call_or_fail("ch11_boundary", "boundary_time", TODO, nbytes, bandwidth, latency, duplex)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-15), (
        f"{nbytes} B at {bandwidth} B/s, α = {latency} s, full duplex {duplex}: you {got}, "
        f"the planner {expected}")
