"""The shared chunking rule: contiguous, covering, sizes within one element."""

import itertools

from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.chunks import chunk_bounds, chunk_sizes


@given(count=st.integers(0, 10**6), parts=st.integers(1, 300))
def test_chunks_cover_the_buffer_and_differ_by_at_most_one(count, parts):
    sizes = chunk_sizes(count, parts)
    assert sum(sizes) == count and len(sizes) == parts
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    bounds = chunk_bounds(count, parts)
    assert bounds[0][0] == 0 and bounds[-1][1] == count
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
