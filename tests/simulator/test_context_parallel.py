"""Context parallelism's simulated twin: the zig-zag layout balances causal work, traffic and
memory follow the closed forms, and the simulated step equals the closed form where the
closed form's assumptions hold (a core and a link per rank, eager sends)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.context_parallel import (
    STEP_WORK,
    AttentionShape,
    StepCosts,
    attention_flops,
    check,
    kv_block_bytes,
    ring_closed_form_s,
    ring_kinds,
    ring_step_flops,
    ring_traffic_bytes,
    simulate_context_parallel,
    ulysses_closed_form_s,
    ulysses_traffic_bytes,
)
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology

ALPHA, BW = 1e-5, 1e9


def cluster(p: int) -> Cluster:
    return Cluster.homogeneous("test", Device("d", 1e12, 1e15, math.inf),
                               Topology.fully_connected(p, Link(ALPHA, BW)))


def costs(forward: float, backward: float) -> StepCosts:
    """Step times proportional to each kind's work."""
    return StepCosts({k: forward * w / 4 for k, w in STEP_WORK.items()} | {"local": forward},
                     {k: backward * w / 4 for k, w in STEP_WORK.items()} | {"local": backward})


@given(st.integers(1, 16))
def test_zig_zag_gives_every_rank_the_same_causal_work(p):
    work = [sum(STEP_WORK[k] for k in ring_kinds(r, p, causal=True)) for r in range(p)]
    assert work == [2 * p + 1] * p  # 3 on the diagonal, 2 on each of the other p − 1 steps
    # and the total is the causal triangle of (2p)² sub-blocks: (2p)(2p+1)/2 = p(2p+1)
    assert sum(work) == p * (2 * p + 1)


def test_a_step_s_flops_are_its_sub_blocks_of_the_c_by_c_block():
    shape = AttentionShape(2, 4, 64, 8, causal=True)
    fwd, bwd = attention_flops(8, 8, shape)
    assert fwd == 4 * 2 * 4 * 8 * 8 * 8 and bwd == 2.5 * fwd
    assert ring_step_flops(shape, 4, "diagonal") == (3 * fwd, 3 * bwd)
    assert ring_step_flops(shape, 4, "later") == (2 * fwd, 2 * bwd)


@given(st.integers(1, 8), st.sampled_from(["ring", "ulysses"]))
@settings(deadline=None, max_examples=20)
def test_each_rank_sends_what_the_closed_form_counts(p, scheme):
    shape = AttentionShape(1, 2 * p, 16 * p, 4, causal=True)
    result = simulate_context_parallel(cluster(p), scheme, shape, costs(1e-4, 2e-4))
    sent = sum(s.nbytes for s in result.trace if s.kind == "send" and s.rank == 0)
    expected = (ring_traffic_bytes if scheme == "ring" else ulysses_traffic_bytes)(shape, p)
    assert sent == expected


def test_ring_traffic_grows_with_the_ring_and_ulysses_stays_flat_per_rank():
    per_rank = AttentionShape(1, 8, 1024, 64)
    ring = [ring_traffic_bytes(per_rank, p) / kv_block_bytes(per_rank, p) for p in (2, 4, 8)]
    assert ring == [4, 10, 22]
    # Ulysses at a fixed S/p: 8A(p−1)/p → 8A
    a = [ulysses_traffic_bytes(AttentionShape(1, 8, 128 * p, 64), p) for p in (2, 4, 8)]
    assert a[0] < a[1] < a[2] < 8 * AttentionShape(1, 8, 1024, 64).shard_bytes(8)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("p", [1, 2, 4])
def test_compute_bound_ring_step_equals_the_closed_form(p, causal):
    shape = AttentionShape(1, 4, 64 * p, 16, causal=causal)
    step = costs(5e-3, 1e-2)  # far above a block's transfer: every transfer hides
    simulated = simulate_context_parallel(cluster(p), "ring", shape, step).makespan_s
    closed = ring_closed_form_s(shape, p, step, ALPHA, 1 / BW)
    reduce = (p - 1) * kv_block_bytes(shape, p) / cluster(p).devices[0].reduce_Bps
    assert simulated == pytest.approx(closed + reduce, rel=1e-9)


@pytest.mark.parametrize("p", [2, 4])
def test_communication_bound_ring_step_pays_every_transfer(p):
    shape = AttentionShape(4, 8, 4096 * p, 64)  # a block of 2·4·8·4096·64·4 B = 67 MB
    step = costs(1e-6, 1e-6)
    simulated = simulate_context_parallel(cluster(p), "ring", shape, step).makespan_s
    hop = ALPHA + kv_block_bytes(shape, p) / BW
    assert simulated >= (2 * (p - 1) + 1) * hop
    assert simulated == pytest.approx(ring_closed_form_s(shape, p, step, ALPHA, 1 / BW),
                                      rel=0.05)


@pytest.mark.parametrize("p", [1, 2, 4])
def test_ulysses_step_equals_four_all_to_alls_and_the_local_attention(p):
    shape = AttentionShape(2, 8, 256 * p, 32, causal=True)
    step = costs(3e-3, 7e-3)
    c = cluster(p)
    simulated = simulate_context_parallel(c, "ulysses", shape, step).makespan_s
    closed = ulysses_closed_form_s(shape, p, step, ALPHA, 1 / BW, c.devices[0].memcpy_Bps)
    assert simulated == pytest.approx(closed, rel=1e-6)


def test_shared_cores_stretch_the_compute():
    shape = AttentionShape(1, 4, 256, 16, causal=True)
    alone = simulate_context_parallel(cluster(4), "ring", shape, costs(1e-2, 2e-2))
    shared = simulate_context_parallel(cluster(4), "ring", shape, costs(1e-2, 2e-2), cores=2)
    assert shared.makespan_s == pytest.approx(2 * alone.makespan_s, rel=0.02)


def test_activation_memory_per_rank_shrinks_with_the_world():
    shape = AttentionShape(1, 8, 2048, 64, causal=True)
    for scheme in ("ring", "ulysses"):
        peaks = [max(simulate_context_parallel(cluster(p), scheme, shape, costs(1e-4, 1e-4),
                                               trace=False).peak_memory_bytes)
                 for p in (1, 2, 4, 8)]
        assert peaks == sorted(peaks, reverse=True) and peaks[-1] < peaks[0] / 4


def test_shapes_that_do_not_split_are_refused_clearly():
    with pytest.raises(ValueError, match="2·world = 8"):
        check(AttentionShape(1, 8, 20, 4), 4, "ring")
    with pytest.raises(ValueError, match="heads and seq divisible by world = 4"):
        check(AttentionShape(1, 6, 16, 4), 4, "ulysses")
    with pytest.raises(ValueError, match="unknown scheme"):
        check(AttentionShape(1, 8, 16, 4), 2, "tree")
