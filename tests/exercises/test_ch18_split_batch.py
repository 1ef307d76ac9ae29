"""Grading exercise 18.1: a global batch cut over replicas and workers, as the strategies cut
it.

Run with ``make grade EX=18.1`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex18_1
tests/exercises`` (the reference answer).
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends.tf_distribute import MirroredStrategy, MultiWorkerMirroredStrategy
from simulator.tf_distribute import replica_rows
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch18, pytest.mark.ex18_1]

TODO = ("replica_rows / worker_slices are not implemented yet: write them in "
        "exercises/ch18_split_batch.py (EXERCISE 18.1), then run `make grade EX=18.1` again")


def call(function, *args):
    return call_or_fail("ch18_split_batch", function, TODO, *args)


def test_the_chapters_awkward_batches():
    assert list(call("replica_rows", 7, 3)) == [3, 3, 1]
    assert list(call("replica_rows", 5, 4)) == [2, 2, 1, 0]
    assert list(call("replica_rows", 1, 4)) == [1, 0, 0, 0]


def test_every_batch_and_replica_count_as_the_simulator():
    for batch in range(1, 41):
        for k in range(1, 10):
            got = list(call("replica_rows", batch, k))
            assert got == replica_rows(batch, k), f"{batch} rows on {k} replicas"


@given(st.integers(1, 30), st.integers(1, 5))
def test_a_mirrored_strategy_hands_each_replica_those_rows(batch, k):
    rows = list(call("replica_rows", batch, k))
    slices = MirroredStrategy(["cpu"] * k).distribute_batch(torch.arange(batch)).values
    assert [len(s) for s in slices] == rows


def worker_view(workers, local, worker):
    """A MultiWorkerMirroredStrategy as worker ``worker`` of ``workers`` sees itself, without a
    process group: ``distribute_batch`` reads only its worker index, the number of workers
    and its local devices."""
    strategy = object.__new__(MultiWorkerMirroredStrategy)
    strategy.devices = [torch.device("cpu")] * local
    strategy.worker_index, strategy.num_workers = worker, workers
    return strategy


@given(st.integers(1, 30), st.integers(1, 4), st.integers(1, 3), st.data())
def test_each_worker_keeps_the_rows_of_its_local_replicas(batch, workers, local, data):
    worker = data.draw(st.integers(0, workers - 1), label="worker")
    ranges = [tuple(r) for r in call("worker_slices", batch, workers, local, worker)]
    kept = worker_view(workers, local, worker).distribute_batch(torch.arange(batch)).values
    expected = [(int(s[0]), int(s[-1]) + 1) if len(s) else None for s in kept]
    assert len(ranges) == local
    for (start, stop), want in zip(ranges, expected, strict=True):
        if want is None:
            assert start == stop, f"an empty slice is (s, s), got {(start, stop)}"
        else:
            assert (start, stop) == want


@pytest.mark.parametrize(("function", "args"), [
    ("replica_rows", (0, 3)), ("replica_rows", (4, 0)), ("worker_slices", (8, 2, 2, 2)),
    ("worker_slices", (8, 0, 2, 0)), ("worker_slices", (8, 2, 0, 0))])
def test_bad_arguments_raise_value_error(function, args):
    try:
        call(function, *args)
    except ValueError:
        return
    pytest.fail(f"{function}{args} should raise ValueError", pytrace=False)
