"""Sizes and exchanges: chunks in whole elements, and one step costs α + n·β."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.chunks import chunk_sizes
from simulator.collectives.exchange import buffer_nbytes, chunk_nbytes, sendrecv
from simulator.core import Link, Topology, run_spmd
from tests.simulator.collective_helpers import cluster


@given(nbytes=st.integers(0, 10**6), parts=st.integers(1, 64), itemsize=st.sampled_from([1, 4, 8]))
def test_chunks_are_the_shared_element_cut_in_bytes(nbytes, parts, itemsize):
    sizes = chunk_nbytes(nbytes, parts, itemsize)
    assert sizes == [c * itemsize for c in chunk_sizes(nbytes // itemsize, parts)]
    assert sum(sizes) == buffer_nbytes(nbytes, itemsize) > nbytes - itemsize


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="itemsize"):
        buffer_nbytes(8, 0)
    with pytest.raises(ValueError, match="bytes"):
        buffer_nbytes(-1, 4)


@pytest.mark.parametrize(("there", "back"), [(1000, 1000), (1000, 4000), (0, 10)])
def test_sendrecv_ends_with_the_longer_direction(there, back):
    def swap(comm):
        peer = 1 - comm.rank
        mine, theirs = (there, back) if comm.rank == 0 else (back, there)
        yield from sendrecv(comm, peer, mine, peer, theirs)

    topo = Topology.fully_connected(2, Link(1e-3, 1e6, "fair"))
    result = run_spmd(cluster(topo), swap)
    assert result.makespan_s == pytest.approx(1e-3 + max(there, back) / 1e6)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
def test_receives_posted_ahead_leave_only_each_phases_first_step_waiting_for_its_notice(p):
    """With gloo's receiver-driven sends a step's send waits for the receiver's notice unless
    the receive was posted a step ahead (as the real rings and recursive doubling do): then
    only a phase's first step pays it, one α; a tree's root waits once, as its children post
    their receives at the start."""

    from simulator.collectives.all_gather import ring_all_gather
    from simulator.collectives.all_reduce import recursive_doubling_all_reduce, ring_all_reduce
    from simulator.collectives.broadcast import binomial_broadcast
    from simulator.core import Cluster, Device, Link, Topology, run_spmd

    alpha = 1e-3
    eager = Cluster.homogeneous(
        "t", Device("t", 1e9, 3e9, 1e9), Topology.fully_connected(p, Link(alpha, 1e9, "none")))
    driven = eager.with_host(receiver_driven_sends=True)
    folds = 0 if p & (p - 1) == 0 else 1  # a non-power of two folds in first: one more phase
    for program, phases in ((ring_all_gather, 1), (ring_all_reduce, 2),
                            (recursive_doubling_all_reduce, 1 + folds),
                            (binomial_broadcast, 1)):
        extra = (run_spmd(driven, program, 2**20).makespan_s
                 - run_spmd(eager, program, 2**20).makespan_s)
        assert extra == pytest.approx(phases * alpha, rel=1e-4), program.__name__
