"""Grading exercise 7.3: the effective fusion threshold, against the simulator's."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.horovod.fusion import effective_threshold as lab_threshold
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch07, pytest.mark.ex07_3]

TODO = ("effective_threshold is not implemented yet: write it in exercises/ch07_threshold.py "
        "(EXERCISE 7.3), then run `make grade EX=7.3` again")


def threshold(nbytes, local):
    return call_or_fail("ch07_threshold", "effective_threshold", TODO, nbytes, local)


@given(nbytes=st.integers(0, 2**40), local=st.integers(0, 16))
def test_equal_to_the_simulators(nbytes, local):
    assert threshold(nbytes, local) == lab_threshold(nbytes, local)


@pytest.mark.parametrize(("nbytes", "local"), [(0, 4), (64 * 2**20, 8), (4096, 8), (4097, 8)])
def test_edges(nbytes, local):
    assert threshold(nbytes, local) == lab_threshold(nbytes, local)
