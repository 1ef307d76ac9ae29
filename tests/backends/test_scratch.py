"""The collectives' kept receive buffers: rows are the same tensors call after call, side by
side, and never keep an outgrown buffer alive."""

import torch

from backends.collectives.comm import MAX_KEPT_ROWS, scratch, scratch_rows


def test_rows_are_kept_and_side_by_side():
    like = torch.zeros(3, dtype=torch.float64)
    rows = scratch_rows(like, 2, 5)
    assert [r.numel() for r in rows] == [5, 5]
    assert rows[1].data_ptr() == rows[0].data_ptr() + 5 * 8  # adjacent, no overlap
    assert scratch_rows(like, 2, 5)[0] is rows[0]  # the very same tensor objects
    rows[0].fill_(1.0)
    rows[1].fill_(2.0)
    assert scratch(like, 10).tolist() == [1.0] * 5 + [2.0] * 5  # in scratch's buffer


def test_growing_the_buffer_renews_the_rows():
    like = torch.zeros(1, dtype=torch.int64)
    small = scratch_rows(like, 2, 4)
    scratch(like, 10_000)  # a larger user grows the buffer
    again = scratch_rows(like, 2, 4)
    assert again[0] is not small[0]
    assert again[0].data_ptr() == scratch(like, 8).data_ptr()


def test_no_rows_and_empty_rows():
    like = torch.zeros(1, dtype=torch.float32)
    assert scratch_rows(like, 0, 7) == []
    assert [r.numel() for r in scratch_rows(like, 2, 0)] == [0, 0]


def test_the_kept_row_sets_are_bounded():
    like = torch.zeros(1, dtype=torch.int32)
    scratch(like, 4 * (MAX_KEPT_ROWS + 10))  # large enough: no growth in the loop
    first = scratch_rows(like, 1, 1)
    for n in range(2, MAX_KEPT_ROWS + 10):
        scratch_rows(like, 1, n)
    assert scratch_rows(like, 1, 1)[0] is not first[0]  # forgotten after the limit
