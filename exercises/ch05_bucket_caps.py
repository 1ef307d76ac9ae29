"""Chapter 5 exercise: the bucket caps DDP derives from ``bucket_cap_mb``.

The Reducer fills buckets up to a cap, and the first bucket (the last layers' gradients, ready
first) has its own, smaller cap so that the first all-reduce starts early (textbook chapter 5,
"Gradient reduction"). Both caps come from one constructor argument, ``bucket_cap_mb``. Here
you write that rule the way PyTorch applies it.

Grade your answer::

    make grade EX=5.2

and read ``solutions/ch05_bucket_caps.py`` afterwards.
"""

from __future__ import annotations


def bucket_caps(bucket_cap_mb: float | None) -> tuple[int, int]:
    """``(bucket_cap_bytes, first_bucket_bytes)`` for ``DistributedDataParallel(...,
    bucket_cap_mb=bucket_cap_mb)``.

    Args:
        bucket_cap_mb: the argument as the user passes it, in MiB (PyTorch's "MB" means
            2**20 bytes); ``None`` when the user leaves it out.

    Returns:
        The cap of every bucket but the first and the cap of the first, bytes (ints).

    Raises:
        ValueError: a cap that is not > 0.
    """
    # ===== EXERCISE 5.2: DDP's bucket caps ====================================================
    #
    # Points: 4 (in proportion to the tests of ex05_2 that pass; `make grade EX=5.2`)
    #
    # Hints:
    #   1. Read torch/nn/parallel/distributed.py in your installed PyTorch (search for
    #      "first_bucket" / "_BucketCapacityConfig" / "bucket_cap_mb"). What is the default cap,
    #      and what is the first bucket's cap when the user gives no argument?
    #   2. Does a cap the user gives explicitly change the first bucket too? The source says.
    #   3. MiB to bytes: multiply by 2**20 and truncate to an int, as PyTorch does.
    #
    # What is graded (tests/exercises/test_ch05_bucket_caps.py):
    #   - equal to simulator.ddp.bucket_caps for the default and for random explicit caps;
    #   - a cap ≤ 0 raises ValueError.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 5.2: implement bucket_caps in "
                              "exercises/ch05_bucket_caps.py, then run `make grade EX=5.2`")
