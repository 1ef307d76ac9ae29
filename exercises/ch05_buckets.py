"""Chapter 5 exercise: the Reducer's bucket assignment.

DDP does not all-reduce each gradient alone (hundreds of small messages, each paying α) nor
all gradients at once (nothing could start before backward ends). It groups parameters into
**buckets** of about ``bucket_cap_mb`` (Li et al., VLDB 2020, §3.2.3; textbook chapter 5):

* parameters are taken in **reverse** registration order — backward produces the last
  layer's gradients first;
* parameters go into the open bucket until it holds **at least** its cap; then it closes
  (a parameter is never split, so a bucket may end up larger than its cap);
* the **first** bucket has its own, usually smaller, cap (PyTorch: 1 MiB when
  ``bucket_cap_mb`` is left at its default), so that the first all-reduce starts early;
* whatever is left at the end forms the last bucket.

Example: four 1 MiB parameters, cap 2 MiB, first bucket 1 MiB → ``[[3], [2, 1], [0]]``.

Grade your answer::

    make grade CH=05

and read ``solutions/ch05_buckets.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def assign_buckets(param_sizes: Sequence[int], bucket_cap_bytes: int,
                   first_bucket_bytes: int) -> list[list[int]]:
    """Buckets of parameter indices, the bucket all-reduced first at index 0.

    Args:
        param_sizes: size of each parameter in bytes, in registration order
            (``model.parameters()``); all of one dtype.
        bucket_cap_bytes: the cap of every bucket after the first, bytes (> 0).
        first_bucket_bytes: the cap of the first bucket, bytes (> 0).

    Returns:
        A list of buckets, each a list of indices into ``param_sizes``; every index appears
        exactly once, in reverse order overall (``[[3], [2, 1], [0]]`` in the example).

    Raises:
        ValueError: a cap ≤ 0.
    """
    # ===== EXERCISE 5.1: bucket assignment ==================================================
    #
    # Points: 6 (in proportion to the tests of ex05_1 that pass; `make grade EX=5.1`)
    #
    # 1. Raise ValueError if either cap is ≤ 0.
    # 2. Walk i = len − 1, …, 0. Append i to the open bucket and add its size to the bucket's
    #    bytes. If the bytes are now ≥ the current cap (first_bucket_bytes for the first bucket,
    #    bucket_cap_bytes afterwards), close the bucket: append it to the result and open an
    #    empty one.
    # 3. At the end, append the open bucket if it is not empty.
    #
    # What is graded (tests/exercises/test_ch05_buckets.py, `make grade CH=05`):
    #   - equal to PyTorch's own assignment (torch.distributed._compute_bucket_assignment_by_size
    #     with the gradients in reverse order, as DDP's bucket rebuild calls it) on many random
    #     models and caps;
    #   - equal to the simulator's simulator.ddp.assign_buckets, which both twins use;
    #   - sim vs real: the number of all-reduces the real DDP (backends.ddp) launches in one
    #     step equals the number of your buckets.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 5.1: implement assign_buckets in exercises/ch05_buckets.py")
