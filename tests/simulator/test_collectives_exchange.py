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
