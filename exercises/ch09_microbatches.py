"""Chapter 9 exercise: how torchgpipe cuts a mini-batch into micro-batches.

torchgpipe's scatter splits the input along its first dimension with ``Tensor.chunk(chunks)``
(textbook chapter 9, "Micro-batches"). ``chunk`` has two properties that surprise: its pieces
are not as equal as they could be, and it may return *fewer* pieces than asked for — and the
schedule then runs with that many micro-batches. Here you predict the pieces without torch.

Grade your answer::

    make grade EX=9.3

and read ``solutions/ch09_microbatches.py`` afterwards.
"""

from __future__ import annotations


def microbatch_sizes(batch: int, chunks: int) -> list[int]:
    """The sizes of the pieces ``torch.empty(batch).chunk(chunks)`` returns, in order.

    Args:
        batch: samples in the mini-batch (≥ 1).
        chunks: the ``chunks`` argument of GPipe (≥ 1).

    Returns:
        One size per piece; their sum is ``batch``; there may be fewer than ``chunks``.
    """
    # ===== EXERCISE 9.3: the micro-batches of Tensor.chunk ====================================
    #
    # Points: 6 (in proportion to the tests of ex09_3 that pass; `make grade EX=9.3`)
    #
    # Hints:
    #   1. Experiment first: print [len(c) for c in torch.arange(b).chunk(k)] for b = 10, k = 4;
    #      b = 6, k = 4; b = 3, k = 5. Compare with torch.tensor_split, which does something else.
    #   2. chunk fixes one piece size for all but the last piece. Which size makes k pieces
    #      enough to hold b samples, and is as small as possible?
    #   3. Given that size, how many pieces does it take to hold b samples? That count, not k,
    #      is how many micro-batches the pipeline runs.
    #
    # What is graded (tests/exercises/test_ch09_microbatches.py):
    #   - equal to PyTorch's Tensor.chunk for every batch ≤ 64 and chunks ≤ 16;
    #   - the textbook's examples (10 in 4, 6 in 4).
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 9.3: implement microbatch_sizes in "
                              "exercises/ch09_microbatches.py, then run `make grade EX=9.3`")
