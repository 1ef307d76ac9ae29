"""Grading exercise 21.1: the online-softmax merge, numerically, in fp64, against PyTorch's
``scaled_dot_product_attention`` over the whole key sequence.

Run with ``make grade EX=21.1`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex21_1
tests/exercises`` (the reference answer).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch21, pytest.mark.ex21_1]

TODO = ("merge is not implemented yet: write it in exercises/ch21_merge.py (EXERCISE 21.1), "
        "then run `make grade EX=21.1` again")


def merge(*args):
    return call_or_fail("ch21_merge", "merge", TODO, *args)


def block(q, k, v, mask=None):
    """One block's partial attention and log-sum-exp, scaled as SDPA (fp64)."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(s, -1)
    return torch.exp(s - lse.unsqueeze(-1)) @ v, lse


def tensors(seed, rows, cols, dim, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    shape = (2, 3)
    return (torch.randn(*shape, rows, dim, generator=g, dtype=torch.float64) * spread,
            torch.randn(*shape, cols, dim, generator=g, dtype=torch.float64) * spread,
            torch.randn(*shape, cols, dim, generator=g, dtype=torch.float64))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), rows=st.integers(1, 9), cols=st.integers(2, 17),
       dim=st.integers(1, 8), data=st.data())
def test_two_blocks_merge_to_attention_over_all_keys(seed, rows, cols, dim, data):
    q, k, v = tensors(seed, rows, cols, dim)
    cut = data.draw(st.integers(1, cols - 1))
    oa, la = block(q, k[..., :cut, :], v[..., :cut, :])
    ob, lb = block(q, k[..., cut:, :], v[..., cut:, :])
    out, lse = merge(oa, la, ob, lb)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-12)
    assert torch.allclose(lse, block(q, k, v)[1], rtol=0, atol=1e-12)


def test_blocks_merge_in_any_order_and_grouping():
    q, k, v = tensors(1, 5, 12, 4)
    parts = [block(q, k[..., i:i + 4, :], v[..., i:i + 4, :]) for i in (0, 4, 8)]
    want = F.scaled_dot_product_attention(q, k, v)
    left = merge(*merge(*parts[0], *parts[1]), *parts[2])[0]
    right = merge(*parts[2], *merge(*parts[1], *parts[0]))[0]
    assert torch.allclose(left, want, rtol=0, atol=1e-12)
    assert torch.allclose(right, want, rtol=0, atol=1e-12)


def test_large_scores_do_not_overflow():
    # scores in the thousands: e^s is inf in fp64, the log-sum-exp itself is not
    q, k, v = tensors(2, 4, 10, 8, spread=40.0)
    out, lse = merge(*block(q, k[..., :3, :], v[..., :3, :]),
                     *block(q, k[..., 3:, :], v[..., 3:, :]))
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-9)


def test_rows_that_have_seen_nothing_take_the_block_as_it_is():
    # a ring starts every row at o = 0, ℓ = −∞; the first block must come through unchanged
    q, k, v = tensors(3, 6, 7, 5)
    ob, lb = block(q, k, v)
    out, lse = merge(torch.zeros_like(ob), torch.full_like(lb, -math.inf), ob, lb)
    assert torch.equal(lse, lb)
    assert torch.allclose(out, ob, rtol=0, atol=1e-15)


def test_causal_blocks_merge_to_causal_attention():
    # two key blocks under a causal mask: the early rows see nothing of the second block
    q, k, v = tensors(4, 8, 8, 4)
    allowed = torch.ones(8, 8, dtype=torch.bool).tril()
    oa, la = block(q, k[..., :4, :], v[..., :4, :], allowed[:, :4])
    later = block(q[..., 4:, :], k[..., 4:, :], v[..., 4:, :], allowed[4:, 4:])
    out_late, _ = merge(oa[..., 4:, :], la[..., 4:], *later)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(oa[..., :4, :], want[..., :4, :], rtol=0, atol=1e-12)
    assert torch.allclose(out_late, want[..., 4:, :], rtol=0, atol=1e-12)
