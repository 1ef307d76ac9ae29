"""Grading exercise 21.3: the shapes and bytes of DeepSpeed Ulysses' all-to-alls, against
the simulated twin (:func:`simulator.context_parallel.ulysses_traffic_bytes`) and against the
lab's real Ulysses (:mod:`backends.context_parallel.ulysses`) on 2 processes, its messages
counted.

Run with ``make grade EX=21.3`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex21_3
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.launch import spawn
from simulator.context_parallel import AttentionShape, ulysses_traffic_bytes
from tests.exercises import ch21_ranks
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch21, pytest.mark.ex21_3]

TODO = ("{} is not implemented yet: write it in exercises/ch21_ulysses.py (EXERCISE 21.3), "
        "then run `make grade EX=21.3` again")

SHAPES = [(1, 4, 16, 8), (2, 6, 10, 3)]
"""Whole-sequence ``(batch, heads, seq, dim)`` of the real runs."""


def call(name, *args):
    return call_or_fail("ch21_ulysses", name, TODO.format(name), *args)


@given(batch=st.integers(1, 4), per_rank_heads=st.integers(1, 8),
       tokens=st.integers(1, 512), dim=st.integers(1, 128), world=st.integers(1, 16),
       itemsize=st.sampled_from([2, 4]))
def test_traffic_equals_the_simulated_twin(batch, per_rank_heads, tokens, dim, world,
                                           itemsize):
    heads, seq = per_rank_heads * world, tokens * world
    got = call("traffic_bytes", batch, heads, seq, dim, world, itemsize)
    want = ulysses_traffic_bytes(AttentionShape(batch, heads, seq, dim, True, itemsize), world)
    assert got == want, (batch, heads, seq, dim, world, itemsize, got, want)


def test_traffic_stays_flat_when_sequence_and_ranks_grow_together():
    # Jacobs et al.'s point: S/p fixed, the bytes per rank approach 8A, they do not grow
    sent = [call("traffic_bytes", 1, 16, 1024 * p, 64, p) for p in (2, 4, 8, 16)]
    a = 16 * 1024 * 64 * 4
    assert sent == [8 * a * (p - 1) // p for p in (2, 4, 8, 16)]


@given(batch=st.integers(1, 4), per_rank_heads=st.integers(1, 8), tokens=st.integers(1, 64),
       dim=st.integers(1, 64), world=st.integers(1, 16))
def test_head_sharded_shape_holds_as_many_elements(batch, per_rank_heads, tokens, dim, world):
    heads, seq = per_rank_heads * world, tokens * world
    shape = call("head_sharded_shape", batch, heads, seq, dim, world)
    assert tuple(shape) == (batch, per_rank_heads, seq, dim)


def test_equals_the_real_ulysses_on_two_processes():
    mine = [(tuple(call("head_sharded_shape", *s, 2)), call("traffic_bytes", *s, 2, 4))
            for s in SHAPES]  # a stub fails here, before any process starts
    ranks = spawn(ch21_ranks.ulysses, 2, SHAPES, timeout=60, deadline=90)
    for rank, results in enumerate(ranks):
        for s, (shape, sent), real in zip(SHAPES, mine, results, strict=True):
            assert shape == tuple(real["shape"]), (s, rank, shape, real["shape"])
            assert sent == real["sent_bytes"], (
                f"{s}: you say {sent} B, rank {rank} of the real Ulysses sent "
                f"{real['sent_bytes']} B in a step")


@pytest.mark.parametrize("bad", [(1, 6, 16, 8, 4), (1, 4, 10, 8, 4), (1, 4, 16, 8, 0)])
def test_bad_input_raises_value_error(bad):
    with pytest.raises(ValueError):
        call("traffic_bytes", *bad)
