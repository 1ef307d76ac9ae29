"""Grading exercise 9.3: micro-batch sizes, against PyTorch's ``Tensor.chunk``."""

import itertools

import pytest
import torch

from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch09, pytest.mark.ex09_3]

TODO = ("microbatch_sizes is not implemented yet: write it in exercises/ch09_microbatches.py "
        "(EXERCISE 9.3), then run `make grade EX=9.3` again")


def sizes(batch, chunks):
    return list(call_or_fail("ch09_microbatches", "microbatch_sizes", TODO, batch, chunks))


def test_the_textbooks_examples():
    assert sizes(10, 4) == [3, 3, 3, 1]
    assert sizes(6, 4) == [2, 2, 2]


def test_equal_to_pytorchs_chunk():
    for batch, chunks in itertools.product(range(1, 65), range(1, 17)):
        expected = [len(c) for c in torch.empty(batch).chunk(chunks)]
        assert sizes(batch, chunks) == expected, f"batch {batch}, chunks {chunks}"
