"""Grading exercise 21.2: the zig-zag chunk assignment and the causal work of each ring step,
against the lab's real layout (:mod:`backends.context_parallel.blocks`), the simulated twin
(:mod:`simulator.context_parallel`: ``ring_kinds``, ``STEP_WORK``) and a token-by-token count.

Run with ``make grade EX=21.2`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex21_2
tests/exercises`` (the reference answer).
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends.context_parallel.blocks import zigzag_shard
from simulator.context_parallel import STEP_WORK, ring_kinds
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch21, pytest.mark.ex21_2]

TODO = ("{} is not implemented yet: write it in exercises/ch21_zigzag.py (EXERCISE 21.2), "
        "then run `make grade EX=21.2` again")


def call(name, *args):
    return call_or_fail("ch21_zigzag", name, TODO.format(name), *args)


@given(world=st.integers(1, 16), data=st.data())
def test_zigzag_chunks_are_the_real_layouts(world, data):
    rank = data.draw(st.integers(0, world - 1))
    c = 3
    tokens = torch.arange(2 * world * c).view(1, 1, -1)
    first, second = call("zigzag_chunks", rank, world)
    mine = torch.cat([torch.arange(first * c, (first + 1) * c),
                      torch.arange(second * c, (second + 1) * c)])
    assert torch.equal(mine, zigzag_shard(tokens, rank, world).flatten()), (rank, world)


@given(world=st.integers(1, 16))
def test_every_chunk_is_held_once(world):
    for layout in ("zigzag_chunks", "contiguous_chunks"):
        held = sorted(c for r in range(world) for c in call(layout, r, world))
        assert held == list(range(2 * world)), (layout, world, held)


@given(world=st.integers(1, 16), causal=st.booleans(), data=st.data())
def test_zigzag_step_work_equals_the_simulated_twin(world, causal, data):
    rank = data.draw(st.integers(0, world - 1))
    want = [STEP_WORK[kind] for kind in ring_kinds(rank, world, causal)]
    assert call("step_work", rank, world, causal, "zigzag") == want, (rank, world, causal)


@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_step_work_counts_the_blocks_a_causal_mask_leaves(layout, world):
    # token by token: a c × c block of (query chunk, key chunk) is computed when any of its
    # queries may see any of its keys
    c = 2
    for rank in range(world):
        chunks = call(f"{layout}_chunks", rank, world)
        want = []
        for s in range(world):
            theirs = call(f"{layout}_chunks", (rank - s) % world, world)
            want.append(sum(1 for a in chunks for b in theirs
                            if any(qi >= ki for qi in range(a * c, (a + 1) * c)
                                   for ki in range(b * c, (b + 1) * c))))
        assert call("step_work", rank, world, True, layout) == want, (layout, rank, world)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_zigzag_balances_what_contiguous_does_not(world):
    zigzag = [sum(call("step_work", r, world, True, "zigzag")) for r in range(world)]
    contiguous = [sum(call("step_work", r, world, True, "contiguous")) for r in range(world)]
    assert zigzag == [2 * world + 1] * world
    assert contiguous == [4 * r + 3 for r in range(world)]


def test_bad_input_raises_value_error():
    with pytest.raises(ValueError):
        call("zigzag_chunks", 2, 2)
    with pytest.raises(ValueError):
        call("step_work", 0, 2, True, "striped")
