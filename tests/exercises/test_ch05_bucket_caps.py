"""Grading exercise 5.2: DDP's bucket caps, against simulator.ddp.bucket_caps."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.ddp import bucket_caps as lab_bucket_caps
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch05, pytest.mark.ex05_2]

TODO = ("bucket_caps is not implemented yet: write it in exercises/ch05_bucket_caps.py "
        "(EXERCISE 5.2), then run `make grade EX=5.2` again")


def caps(mb):
    return call_or_fail("ch05_bucket_caps", "bucket_caps", TODO, mb)


def test_the_default_caps():
    assert caps(None) == lab_bucket_caps(None)


@given(mb=st.floats(1e-3, 1e4))
def test_explicit_caps(mb):
    got = caps(mb)
    assert got == lab_bucket_caps(mb) and all(isinstance(c, int) for c in got)


@pytest.mark.parametrize("mb", [0, -1.0])
def test_a_cap_of_zero_or_less_raises(mb):
    caps(1.0)  # a stub fails here, not in pytest.raises
    with pytest.raises(ValueError):
        caps(mb)
