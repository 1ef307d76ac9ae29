"""Grading exercise 14.1: model-state bytes per device, against the paper, the simulator, and the
bytes the lab's real ZeRO allocates.

Run with ``make grade CH=14`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch14
tests/exercises`` (the reference answer).
"""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.launch import spawn
from simulator.zero import model_state_bytes as simulated
from tests.backends import zero_ranks
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch14, pytest.mark.ex14_1]

TODO = ("model_state_bytes is not implemented yet: write it in exercises/ch14_zero_memory.py "
        "(EXERCISE 14.1), then run `make grade CH=14` again")


def states(*args):
    return call_or_fail("ch14_zero_memory", "model_state_bytes", TODO, *args)


@pytest.mark.parametrize(("stage", "gb"), [(0, 120), (1, 31.4), (2, 16.6), (3, 1.875)])
def test_the_papers_figure_1(stage, gb):
    got = states(7_500_000_000, stage, 64)["total"] / 1e9
    assert got == pytest.approx(gb, rel=0.01), f"stage {stage}: {got:.2f} GB, paper {gb} GB"


@given(params=st.integers(0, 10**10), stage=st.sampled_from([0, 1, 2, 3]),
       dp=st.integers(1, 1024), precision=st.sampled_from(["mixed", "fp32"]),
       optimizer=st.sampled_from(["adam", "momentum", "sgd"]))
def test_every_case_equals_the_simulator(params, stage, dp, precision, optimizer):
    got = states(params, stage, dp, precision, optimizer)
    want = simulated(params, stage, dp, precision, optimizer).as_dict()
    assert got == want, f"model_state_bytes{(params, stage, dp, precision, optimizer)}"


@pytest.mark.parametrize("bad", [(10, 4, 2), (10, 1, 0), (-1, 1, 2), (10, 1, 2, "fp8"),
                                 (10, 1, 2, "mixed", "lion")])
def test_bad_input_raises_value_error(bad):
    with pytest.raises(ValueError):
        states(*bad)


def test_equals_what_the_real_zero_allocates():
    world, widths = 3, zero_ranks.MEMORY_WIDTHS
    params = sum(a * b + b for a, b in itertools.pairwise(widths))
    states(params, 0, world)  # a stub fails here, before any process starts
    measured = spawn(zero_ranks.run_memory, world, widths, timeout=60)[0]
    for stage, got in measured.items():
        mine = states(params, stage, world, "fp32", "adam")
        for part in ("parameters", "gradients", "optimizer"):
            assert mine[part] == pytest.approx(got[part], rel=0.05), (
                f"stage {stage} {part}: you say {mine[part]} B, the real ZeRO on {world} "
                f"processes holds {got[part]} B")
