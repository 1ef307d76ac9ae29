"""Chapter 18 exercise: cut a global batch over replicas and workers, awkward sizes included.

``MirroredStrategy`` and ``MultiWorkerMirroredStrategy`` (textbook chapter 18, "Distributed
input") give every replica a slice of the *global* batch. The lab cuts it the way
``torch.chunk`` does — every slice ``⌈n/k⌉`` rows, the last one shorter — and, because every
replica must still join every all-reduce, replicas left without rows get an **empty** slice::

    7 rows, 3 replicas  →  3, 3, 1
    5 rows, 4 replicas  →  2, 2, 1, 0
    1 row,  4 replicas  →  1, 0, 0, 0

With several workers (processes) of ``L`` local replicas each, the global batch is cut into
``W·L`` slices and worker ``w`` keeps slices ``w·L … w·L + L − 1`` (TF's auto-sharding by
``DATA``). The lab's own are ``simulator.tf_distribute.replica_rows`` and the strategies'
``distribute_batch``.

Grade your answer::

    make grade EX=18.1

and read ``solutions/ch18_split_batch.py`` afterwards.
"""

from __future__ import annotations


def replica_rows(batch: int, replicas: int) -> list[int]:
    """Rows of each replica's slice of a global ``batch ≥ 1`` over ``replicas ≥ 1``."""
    # ===== EXERCISE 18.1: split a global batch over replicas and workers ===================
    #
    # Points: 4 (in proportion to the tests of ex18_1 that pass; `make grade EX=18.1`)
    #
    # replica_rows: torch.chunk's rule, padded with empty slices to one per replica.
    # worker_slices (below): worker w's (start, stop) row ranges of the global batch, one
    #   per local replica, with the batch cut over workers × local replicas.
    # Either raises ValueError for batch < 1, replicas < 1, workers < 1, local < 1 or a
    # worker index outside 0 … workers − 1.
    #
    # Hints:
    #   1. torch.chunk gives every chunk ⌈n/k⌉ rows until the rows run out — so it may
    #      return FEWER than k chunks (5 rows in 4 chunks of 2: 2, 2, 1). It does not spread
    #      the remainder: 7 on 3 is 3, 3, 1, not 3, 2, 2.
    #   2. -(-n // k) is ⌈n/k⌉ in integers.
    #   3. The ranges follow from the row counts by a running sum; an empty slice is
    #      (s, s).
    #
    # What is graded (tests/exercises/test_ch18_split_batch.py, `make grade EX=18.1`):
    #   - replica_rows equals simulator.tf_distribute.replica_rows for every batch and
    #     replica count up to 40 and 9, sums to the batch, one entry per replica;
    #   - MirroredStrategy(["cpu"] * k).distribute_batch hands replica i exactly
    #     replica_rows(n, k)[i] rows;
    #   - worker_slices: the rows each worker's MultiWorkerMirroredStrategy.distribute_batch
    #     keeps, for 1–4 workers of 1–3 local replicas;
    #   - bad arguments raise ValueError.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 18.1: implement replica_rows in "
                              "exercises/ch18_split_batch.py")


def worker_slices(batch: int, workers: int, local: int, worker: int) -> list[tuple[int, int]]:
    """Worker ``worker``'s ``(start, stop)`` rows of the global batch, one range per local
    replica (EXERCISE 18.1)."""
    raise NotImplementedError("EXERCISE 18.1: implement worker_slices in "
                              "exercises/ch18_split_batch.py")
