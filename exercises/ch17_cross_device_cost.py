"""Chapter 17 exercise: what each cross-device op costs when one thread runs it, and which
is fastest.

In the lab's ``MirroredStrategy`` (textbook chapters 17–18) the gradient all-reduce is a
*merge call*: the last replica thread to arrive runs the strategy's cross-device op for
everyone, one copy and one addition after another. On a host, a "transfer" to another device
is a copy at ``R_copy`` bytes/s and an in-place addition runs at ``R_add`` bytes/s. For ``k``
replica buffers of ``n`` bytes each (float32, ``n`` a multiple of 4), the three ops of
``backends.tf_distribute.cross_device_ops`` do:

* ``one_device`` (``ReductionToOneDevice``) — the first buffer copied into the sum, every
  other buffer copied to the reducing device and added, then the sum copied back to each of
  the ``k`` buffers;
* ``ring`` (``RingAllReduce``) — ``k − 1`` reduce-scatter steps (each replica copies one
  chunk to the next, which adds it) and ``k − 1`` all-gather steps (a copy per replica);
  the ``k`` chunks of a step cover the buffer once;
* ``hierarchical`` (``HierarchicalCopyAllReduce``) — replicas in consecutive groups of
  ``group_size`` (the last may be smaller; ``simulator.tf_distribute.mirrored.groups_of``):
  each non-leader copied to its group's leader and added, a ring among the leaders (if more
  than one group), each non-leader given the result back (a copy).

The simulated twin (``simulator.tf_distribute.mirrored``, ``CROSS_DEVICE_OPS``) runs exactly
those copies and additions on one simulated host thread.

Grade your answer::

    make grade EX=17.3

and read ``solutions/ch17_cross_device_cost.py`` afterwards.
"""

from __future__ import annotations

OPS = ("ring", "one_device", "hierarchical")
"""The cross-device ops by the simulator's names."""


def cross_device_op_s(op: str, nbytes: int, k: int, memcpy_Bps: float, reduce_Bps: float,
                      group_size: int = 2) -> float:
    """Seconds one host thread spends in ``op`` all-reducing ``k ≥ 2`` buffers of ``nbytes``
    each, copies at ``memcpy_Bps`` and additions at ``reduce_Bps`` (bytes/s)."""
    # ===== EXERCISE 17.3: the cost of each cross-device op, and the fastest ================
    #
    # Points: 6 (in proportion to the tests of ex17_3 that pass; `make grade EX=17.3`)
    #
    # Derive, for each op above, how many bytes one thread copies and how many it adds, then
    # price them: copied / memcpy_Bps + added / reduce_Bps. Raise ValueError for an op not
    # in OPS.
    #
    # fastest(...) below returns the name of the op with the smallest cost (any of the
    # fastest if several tie).
    #
    # Hints:
    #   1. Write c = n / R_copy and a = n / R_add. The ring's reduce-scatter moves and adds
    #      one whole buffer per step (its k chunks); its all-gather moves one per step.
    #   2. Hierarchical: how many non-leaders are there with g = ⌈k / group_size⌉ groups?
    #      The leaders' ring is the ring formula with g in place of k.
    #   3. Compare the totals. Is there ever a difference between the ring and the
    #      hierarchical op here? Why does the ring pay off on GPUs, where the k transfers of
    #      a ring step run at once, each on its own link — and not on one host thread?
    #
    # What is graded (tests/exercises/test_ch17_cross_device_cost.py, `make grade EX=17.3`):
    #   - cross_device_op_s equals the simulated twin's time for the same op (run on one
    #     simulated host thread) for random n, k (2–9), rates and group sizes (rel. 1e-9);
    #   - fastest names an op whose simulated time is the smallest;
    #   - an unknown op raises ValueError;
    #   - measure: the grader times the real ops (backends.tf_distribute, 2 and 4 CPU
    #     replicas, 1 and 8 MiB) and the copy and addition rates on this host, one thread;
    #     your median relative error may reach max(1.5 × e, e + 0.10), where e is the
    #     simulated twin's from the same rates (run with `pytest -s` to see both).
    #     Where does the one-thread model miss, and why (chunk sizes, caches)?
    # =======================================================================================
    raise NotImplementedError("EXERCISE 17.3: implement cross_device_op_s in "
                              "exercises/ch17_cross_device_cost.py")


def fastest(nbytes: int, k: int, memcpy_Bps: float, reduce_Bps: float,
            group_size: int = 2) -> str:
    """The name (in :data:`OPS`) of the cheapest cross-device op (EXERCISE 17.3)."""
    raise NotImplementedError("EXERCISE 17.3: implement fastest in "
                              "exercises/ch17_cross_device_cost.py")
