"""Grading exercise 22.2: the dispatch's split sizes, literally, against the simulator, and
against the real expert-parallel exchange on 2 and 3 processes.

Run with ``make grade EX=22.2`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex22_2
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.launch import RankError, spawn
from backends.moe.measure import MoEConfig
from simulator.moe import exchange_bytes
from tests.exercises import ch22_ranks
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch22, pytest.mark.ex22_2]

TODO = ("dispatch_splits is not implemented yet: write it in exercises/ch22_dispatch_splits.py "
        "(EXERCISE 22.2: what each rank sends and receives in the dispatch), then run "
        "`make grade EX=22.2` again")


def splits(counts, rank):
    return call_or_fail("ch22_dispatch_splits", "dispatch_splits", TODO, counts, rank)


def test_the_textbook_example_with_two_ranks():
    # rank 0 routes a→e2 b→e0 c→e3 d→e1; rank 1 routes w→e0 x→e0 y→e2 z→e3
    table = [[1, 1, 1, 1], [2, 0, 1, 1]]
    assert [list(x) for x in splits(table, 0)] == [[2, 2], [2, 2]], (
        "rank 0 keeps b, d and sends a, c; it receives its own b, d and rank 1's w, x")
    assert [list(x) for x in splits(table, 1)] == [[2, 2], [2, 2]]
    uneven = [[3, 0, 0, 1], [0, 0, 5, 2]]
    assert [list(x) for x in splits(uneven, 0)] == [[3, 1], [3, 0]], "rank 0, uneven table"
    assert [list(x) for x in splits(uneven, 1)] == [[0, 7], [1, 7]], "rank 1, uneven table"


@given(p=st.integers(1, 4), m=st.integers(1, 3), data=st.data())
def test_equal_to_the_simulator_exchange_on_random_tables(p, m, data):
    table = [data.draw(st.lists(st.integers(0, 9), min_size=p * m, max_size=p * m))
             for _ in range(p)]
    d_model, itemsize = 16, 4
    out = exchange_bytes(table, d_model, itemsize)
    answers = [splits(table, r) for r in range(p)]
    for r, (send, recv) in enumerate(answers):
        assert [n * d_model * itemsize for n in send] == out[r], (
            f"table {table}, rank {r}: the simulator sends {out[r]} bytes per rank, you "
            f"{[n * d_model * itemsize for n in send]} ({d_model * itemsize} B a row)")
        assert list(recv) == [answers[s][0][r] for s in range(p)], (
            f"table {table}, rank {r}: it must receive from each rank what that rank sends it")


@pytest.mark.parametrize("world", [2, 3])
def test_equal_to_the_real_expert_parallel_dispatch(world):
    splits([[1, 1]], 0)  # a stub fails here, before any process starts
    config = MoEConfig(d_model=8, hidden=8, experts=6, k=2, capacity_factor=1.0, skew=1.5)
    try:
        got = spawn(ch22_ranks.dispatch, world, config, 11, timeout=20, deadline=60)
    except RankError as exc:
        if "not implemented" in str(exc):
            pytest.fail(TODO, pytrace=False)
        raise
    for rank, r in enumerate(got):
        send, recv = r["real"]
        assert [list(x) for x in r["yours"]] == [send, recv], (
            f"{world} ranks, routing table {r['table']}, rank {rank}: the real dispatch sends "
            f"{send} and receives {recv}; yours {r['yours']}")
