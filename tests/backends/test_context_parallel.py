"""Context parallelism's real twin equals single-process attention: ring attention (zig-zag,
causal or not) and Ulysses give the output and the q, k, v gradients of PyTorch's
``scaled_dot_product_attention`` over the whole sequence, in fp64, at worlds 1–4 with odd
heads, chunks and head sizes; shapes that do not split are refused with a clear message; and
PyTorch's own context-parallel API agrees (forward) where it runs on this machine; where it
does not (on gloo/CPU with torch 2.13 the causal call raises), the skip says why."""

import pytest
import torch

from backends.context_parallel.blocks import block_forward, merge, pieces, zigzag_shard
from backends.launch import spawn
from backends.launch_faults import RankError
from tests.backends.context_parallel_ranks import (
    CASES,
    parity,
    pytorch_context_parallel,
    refusals,
)

PYTORCH_DEADLINE_S = 45.0
"""How long PyTorch's context-parallel forward may take on two processes, s: on the CPU the
non-causal call goes through DTensor's decomposition of the attention operator, not a ring,
and may not finish at all (marked ``slow``)."""

TOLERANCE = 1e-12
"""Largest |difference| allowed in fp64 (the blocks re-associate sums: ~1e-15 seen)."""


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_ring_and_ulysses_equal_single_process_attention_and_its_gradients(world):
    errors = spawn(parity, world, ("ring", "ulysses"), timeout=60)
    ring = [k for k in errors[0] if k.startswith("ring")]
    assert len(ring) == len(CASES)  # every case ran, causal and not
    assert any(k.startswith("ulysses") for k in errors[0])
    for rank_errors in errors:
        assert max(rank_errors.values()) < TOLERANCE, rank_errors


def test_shapes_that_do_not_split_are_refused_with_the_reason():
    got = spawn(refusals, 2, timeout=60)[0]
    assert "3 heads do not divide over 2 ranks" in got["heads"]
    assert "2·world = 4 zig-zag chunks" in got["seq"] and "5 tokens" in got["seq"]
    assert "3 tokens do not divide over 2 ranks" in got["ulysses seq"]


def test_the_online_merge_of_two_blocks_is_attention_over_both():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    whole, lse = block_forward(q, k, v, 0.5)
    a, la = block_forward(q, k[..., :2, :], v[..., :2, :], 0.5)
    b, lb = block_forward(q, k[..., 2:, :], v[..., 2:, :], 0.5)
    out, ell = merge(a, la, b, lb)
    assert torch.allclose(out, whole, atol=1e-14) and torch.allclose(ell, lse, atol=1e-14)


def test_zig_zag_shards_hold_chunks_r_and_2p_minus_1_minus_r():
    x = torch.arange(16).view(1, 1, 16, 1)
    assert zigzag_shard(x, 1, 4).flatten().tolist() == [2, 3, 12, 13]
    assert [len(pieces(k, 3)) for k in ("full", "diagonal", "earlier", "later")] == [1, 2, 1, 1]


@pytest.mark.parametrize("causal", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_pytorch_context_parallel_agrees_where_it_runs_here(causal):
    try:
        got = spawn(pytorch_context_parallel, 2, causal, timeout=60, deadline=PYTORCH_DEADLINE_S)
    except RankError as err:
        pytest.skip(f"torch {torch.__version__} context_parallel on gloo/CPU (causal={causal}) "
                    f"did not finish: {str(err).splitlines()[0]}")
    if "error" in got[0]:
        pytest.skip(f"torch {torch.__version__} context_parallel does not run on gloo/CPU "
                    f"(causal={causal}): {got[0]['error']}")
    for rank in got:
        assert rank["ok"] < TOLERANCE
