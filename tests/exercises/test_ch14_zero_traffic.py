"""Grading exercise 14.3: ZeRO's communication volume, against simulator.zero."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.zero import communication_bytes as lab_communication_bytes
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch14, pytest.mark.ex14_3]

TODO = ("communication_bytes is not implemented yet: write it in exercises/ch14_zero_traffic.py "
        "(EXERCISE 14.3), then run `make grade EX=14.3` again")


def volume(params, stage, dp, precision):
    return call_or_fail("ch14_zero_traffic", "communication_bytes", TODO, params, stage, dp,
                        precision)


@given(params=st.integers(1, 10**12), stage=st.integers(0, 3), dp=st.integers(1, 4096),
       precision=st.sampled_from(["mixed", "fp32"]))
def test_equal_to_the_simulators_volume(params, stage, dp, precision):
    expected = lab_communication_bytes(params, stage, dp, precision)
    got = volume(params, stage, dp, precision)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-9), (
        f"Ψ = {params}, stage {stage}, N_d = {dp}, {precision}: you {got}, expected {expected}")


def test_stage_3_sends_one_and_a_half_times_stage_0():
    assert volume(10**9, 3, 64, "mixed") == pytest.approx(1.5 * volume(10**9, 0, 64, "mixed"))
