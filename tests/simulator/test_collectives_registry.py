"""The collectives registry: every algorithm runs for any p and size, equals its closed form
without contention, and the auto policy picks MPICH's algorithm."""

from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives import ALGORITHMS, auto_all_reduce, select_all_reduce
from simulator.core import Device, run_spmd
from tests.simulator import collective_helpers as helpers

GAMMA = 1 / 3e9  # s/B: the test device reduces 3 GB/s
DEV = Device("test", flops_per_s=1e12, mem_bandwidth_Bps=9e9, memory_bytes=1e9,
             reduce_Bps=1 / GAMMA)
fully_connected = partial(helpers.fully_connected, device=DEV)
ITEM = 4

EVERY = [(op, name) for op, algs in ALGORITHMS.items() for name in algs]
WITH_COST = [(op, name) for op, name in EVERY if ALGORITHMS[op][name][1] is not None]
# Closed forms that hold for every p, not only p = 2^k.
ANY_P = {("broadcast", "linear"), ("broadcast", "binomial"), ("broadcast", "pipelined_chain"),
         ("scatter", "linear"), ("gather", "linear"), ("reduce", "linear"),
         ("all_gather", "ring"), ("all_gather", "bruck"), ("reduce_scatter", "ring"),
         ("reduce_scatter", "pairwise"), ("all_reduce", "ring"), ("all_reduce", "segmented_ring"),
         ("all_to_all", "pairwise"),
         ("all_to_all", "bruck")}


def test_registry_has_every_operation_and_algorithm_of_the_spec():
    assert {op: sorted(algs) for op, algs in ALGORITHMS.items()} == {
        "broadcast": ["binomial", "linear", "pipelined_chain", "scatter_allgather"],
        "scatter": ["binomial", "linear"],
        "gather": ["binomial", "linear"],
        "reduce": ["binomial", "linear", "rabenseifner"],
        "all_gather": ["bruck", "recursive_doubling", "ring"],
        "reduce_scatter": ["pairwise", "recursive_halving", "ring"],
        "all_reduce": ["binary_tree", "double_binary_tree", "hierarchical", "rabenseifner",
                       "recursive_doubling", "reduce_broadcast", "ring", "segmented_ring"],
        "all_to_all": ["bruck", "pairwise"],
    }


@pytest.mark.parametrize(("op", "name"), EVERY)
@given(p=st.integers(1, 9), count=st.integers(0, 40), ragged=st.integers(0, ITEM - 1),
       root=st.integers(0, 8), model=st.sampled_from(["none", "fair"]))
def test_every_algorithm_finishes_for_any_world_and_awkward_size(op, name, p, count, ragged,
                                                                 root, model):
    program, _ = ALGORITHMS[op][name]
    kwargs = {}
    if op in ("broadcast", "scatter"):
        kwargs["src"] = root % p
    elif op in ("gather", "reduce"):
        kwargs["dst"] = root % p
    result = run_spmd(fully_connected(p, model=model), program, count * ITEM + ragged, **kwargs)
    assert result.makespan_s >= 0
    if p == 1:  # nobody to talk to
        assert result.makespan_s == 0 and result.total_bytes == 0


@pytest.mark.parametrize(("op", "name"), WITH_COST)
@given(k=st.integers(0, 4), per_rank=st.integers(0, 300), alpha=st.floats(0, 1e-4),
       bw=st.floats(1e8, 1e11), data=st.data())
def test_simulation_equals_closed_form_without_contention(op, name, k, per_rank, alpha, bw,
                                                          data):
    program, cost = ALGORITHMS[op][name]
    assert cost is not None
    p = data.draw(st.integers(1, 12), "p") if (op, name) in ANY_P else 2**k
    n = p * per_rank * ITEM  # chunking is exact
    result = run_spmd(fully_connected(p, alpha, bw), program, n, trace=False)
    assert result.makespan_s == pytest.approx(cost(p, n, alpha, 1 / bw, GAMMA), rel=1e-9,
                                              abs=1e-15)


@given(p=st.integers(1, 9), segments=st.integers(1, 6), per_segment=st.integers(0, 200),
       alpha=st.floats(0, 1e-4), bw=st.floats(1e8, 1e11), gamma=st.sampled_from([GAMMA, 0.0]))
def test_segmented_ring_equals_its_closed_form_when_every_chunk_is_cut(p, segments, per_segment,
                                                                       alpha, bw, gamma):
    """Segments of one element at least, so that every chunk is cut; the test device's γ
    (reductions hidden by the transfers or not, depending on α and the bandwidth drawn)."""
    n = p * segments * per_segment * ITEM
    device = DEV if gamma else Device("fast", flops_per_s=1e12, mem_bandwidth_Bps=9e9,
                                      memory_bytes=1e9, reduce_Bps=float("inf"))
    program = partial(ALGORITHMS["all_reduce"]["segmented_ring"][0], segments=segments,
                      min_segment_bytes=ITEM)
    cost = ALGORITHMS["all_reduce"]["segmented_ring"][1]
    assert cost is not None
    result = run_spmd(helpers.fully_connected(p, alpha, bw, device=device), program, n,
                      trace=False)
    expected = cost(p, n, alpha, 1 / bw, gamma, segments=segments, min_segment_bytes=ITEM)
    assert result.makespan_s == pytest.approx(expected, rel=1e-9, abs=1e-15)


@given(p=st.integers(1, 64), nbytes=st.integers(0, 2**30))
def test_auto_policy_is_mpich_by_size_then_power_of_two(p, nbytes):
    choice = select_all_reduce(p, nbytes)
    if nbytes <= 2048:
        assert choice == "recursive_doubling"
    elif p & (p - 1) == 0:
        assert choice == "rabenseifner"
    else:
        assert choice == "ring"


@pytest.mark.parametrize(("p", "nbytes", "chosen"), [(8, 1024, "recursive_doubling"),
                                                    (8, 2048, "recursive_doubling"),
                                                    (8, 2052, "rabenseifner"),
                                                    (6, 2**20, "ring")])
def test_auto_all_reduce_runs_the_chosen_algorithm(p, nbytes, chosen):
    cluster = fully_connected(p)
    auto = run_spmd(cluster, auto_all_reduce, nbytes)
    direct = run_spmd(cluster, ALGORITHMS["all_reduce"][chosen][0], nbytes)
    assert auto.makespan_s == direct.makespan_s
    assert auto.bytes_per_channel == direct.bytes_per_channel
