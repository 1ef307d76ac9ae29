"""Grading exercise 15.1: device names parsed and formatted as the lab's ``DeviceName`` does.

Run with ``make grade EX=15.1`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex15_1
tests/exercises`` (the reference answer).
"""

from dataclasses import astuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.tf_runtime.cluster import DeviceName
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch15, pytest.mark.ex15_1]

TODO = ("format_device_name / parse_device_name are not implemented yet: write them in "
        "exercises/ch15_device_names.py (EXERCISE 15.1), then run `make grade EX=15.1` again")

JOBS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True)
NUMBERS = st.integers(0, 120)
DEVICES = st.builds(DeviceName, JOBS, NUMBERS, NUMBERS, st.sampled_from(["CPU", "GPU", "TPU"]),
                    NUMBERS)


def fmt(device):
    return call_or_fail("ch15_device_names", "format_device_name", TODO, device)


def parse(name):
    return call_or_fail("ch15_device_names", "parse_device_name", TODO, name)


@st.composite
def written_names(draw):
    """A name the way people write them: some fields left out, any order, keys in any case,
    the legacy ``/cpu:0`` form for CPUs and GPUs."""
    d = draw(DEVICES)
    parts = []
    for key, value in (("job", d.job), ("replica", d.replica), ("task", d.task)):
        if draw(st.booleans()):
            parts.append(f"{draw(st.sampled_from([key, key.upper()]))}:{value}")
    if draw(st.booleans()):
        kind = draw(st.sampled_from([d.device_type, d.device_type.lower()]))
        legacy = d.device_type in ("CPU", "GPU") and draw(st.booleans())
        parts.append(f"{kind}:{d.index}" if legacy else f"device:{kind}:{d.index}")
    return "/" + "/".join(draw(st.permutations(parts))) if parts else "/job:" + d.job


@given(DEVICES)
def test_format_writes_the_canonical_full_name(device):
    assert fmt(astuple(device)) == str(device)


@given(written_names())
def test_parse_reads_what_device_name_parse_reads(name):
    assert tuple(parse(name)) == astuple(DeviceName.parse(name)), name


@given(DEVICES)
def test_format_after_parse_gives_the_full_name_back(device):
    assert fmt(tuple(parse(str(device)))) == str(device)


@pytest.mark.parametrize("name", [
    "/job:worker/replica:0/task:1/device:CPU:0", "/cpu:0", "/gpu:3", "/job:ps/task:2/cpu:1",
    "/device:gpu:1/task:4", "/TASK:7", "/job:chief"])
def test_parse_the_names_of_the_chapter(name):
    assert tuple(parse(name)) == astuple(DeviceName.parse(name))


@pytest.mark.parametrize("name", [
    "job:worker/task:0", "", "/", "/job:worker//task:0", "/job:worker/foo:1", "/task:1/task:2",
    "/task:x", "/replica:-1", "/device:CPU", "/device:CPU:0:1", "/device:C1:0", "/job:1abc",
    "/job:a-b", "/cpu:x", "/job"])
def test_bad_names_raise_value_error(name):
    with pytest.raises(ValueError):
        DeviceName.parse(name)  # the lab's twin refuses it too
    try:
        parse(name)
    except ValueError:
        return
    pytest.fail(f"parse_device_name({name!r}) should raise ValueError", pytrace=False)
