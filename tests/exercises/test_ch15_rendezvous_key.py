"""Grading exercise 15.3: rendezvous keys built and parsed as the lab's runtime does.

Run with ``make grade EX=15.3`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex15_3
tests/exercises`` (the reference answer).
"""

from dataclasses import astuple

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends.tf_runtime import rendezvous
from backends.tf_runtime.cluster import ClusterSpec, DeviceName
from backends.tf_runtime.graph import capture, place, prune
from backends.tf_runtime.partition import partition
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch15, pytest.mark.ex15_3]

TODO = ("make_key / parse_key are not implemented yet: write them in "
        "exercises/ch15_rendezvous_key.py (EXERCISE 15.3), then run `make grade EX=15.3` again")

DEVICES = st.builds(DeviceName, st.sampled_from(["worker", "ps", "chief"]), st.integers(0, 2),
                    st.integers(0, 64), st.sampled_from(["CPU", "GPU"]),
                    st.integers(0, 8)).map(str)
TENSORS = st.from_regex(r"[a-z_][a-z0-9_]{0,10}(/grad)?:[0-9]", fullmatch=True)
FIELDS = st.tuples(DEVICES, st.integers(0, 2**64 - 1), DEVICES, TENSORS, st.integers(0, 50),
                   st.integers(0, 10**6))


def call(function, *args):
    return call_or_fail("ch15_rendezvous_key", function, TODO, *args)


@given(FIELDS)
def test_make_key_writes_the_labs_key(fields):
    assert call("make_key", *fields) == rendezvous.rendezvous_key(*fields)


@given(FIELDS)
def test_parse_key_inverts_make_key_and_agrees_with_the_lab(fields):
    key = rendezvous.rendezvous_key(*fields)
    assert tuple(call("parse_key", key)) == fields
    assert tuple(call("parse_key", key)) == astuple(rendezvous.parse_key(key))


def test_the_keys_of_a_real_partition_name_their_pair():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    cluster = ClusterSpec.local(2)
    graph = place(prune(capture(net, torch.randn(3, 4))), cluster.device(0),
                  by_prefix={"2": cluster.device(1)})
    parts = partition(graph, cluster, incarnations={str(cluster.device(0)): 0xBEEF})
    sends = [(p.rank, s) for p in parts for s in p.sends]
    assert sends, "the placement should cut one edge"
    for rank, send in sends:
        src, incarnation, dst, tensor, frame, iteration = call("parse_key", send.key)
        assert src == str(cluster.device(rank)) and dst == str(cluster.device(send.peer))
        assert (incarnation, tensor, frame, iteration) == (0xBEEF, f"{send.tensor}:0", 0, 0)
        assert call("make_key", src, incarnation, dst, tensor) == send.key


@pytest.mark.parametrize("key", [
    "", "a;b;c;d", "/job:w/task:0;01;/job:w/task:1;x:0;0:0;extra", "/job:w/task:0;01;/job:w"
    "/task:1;x:0;00", "/job:w/task:0;zz;/job:w/task:1;x:0;0:0"])
def test_malformed_keys_raise_value_error(key):
    try:
        call("parse_key", key)
    except ValueError:
        return
    pytest.fail(f"parse_key({key!r}) should raise ValueError", pytrace=False)
