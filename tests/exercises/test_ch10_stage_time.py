"""Grading exercise 10.2: PipeDream's stage time, against the simulator's planner."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.pipeline import LayerProfile
from simulator.pipeline.planner import stage_time as lab_stage_time
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch10, pytest.mark.ex10_2]

TODO = ("stage_time is not implemented yet: write it in exercises/ch10_stage_time.py "
        "(EXERCISE 10.2), then run `make grade EX=10.2` again")


@given(layers=st.lists(st.tuples(st.floats(0, 1.0), st.floats(0, 1.0), st.integers(0, 10**9)),
                       min_size=1, max_size=8),
       replicas=st.integers(1, 16), bandwidth=st.floats(1e6, 1e11), latency=st.floats(0, 1e-3))
def test_equal_to_the_planners_stage_time(layers, replicas, bandwidth, latency):
    profile = [LayerProfile(str(i), f, b, 0, w) for i, (f, b, w) in enumerate(layers)]
    expected = lab_stage_time(profile, range(len(profile)), replicas, bandwidth, latency)
    got = call_or_fail("ch10_stage_time", "stage_time", TODO, [f + b for f, b, _ in layers],
                       [w for _, _, w in layers], replicas, bandwidth, latency)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-15), (
        f"layers {layers}, r = {replicas}: you {got}, the planner {expected}")
