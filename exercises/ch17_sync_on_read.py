"""Chapter 17 exercise: sync-on-read variables, and a metric that is right on uneven batches.

A ``SyncOnReadVariable`` (textbook chapter 17, "Distributed variables") has one copy per
replica, and each replica writes only its own copy — no communication at all while the step
runs. Reading it *outside* the replicas (the cross-replica context) combines the copies by its
``VariableAggregation``:

* ``SUM`` — the copies added up;
* ``MEAN`` — their sum divided by the number of copies;
* ``ONLY_FIRST_REPLICA`` — the first copy, as it is.

That makes a metric cheap: every replica ``assign_add``\\ s into its own copy, and the one
reduction is paid when the metric is read. The lab's twin is
``backends.tf_distribute.values.SyncOnReadVariable`` (made by ``MirroredStrategy.
sync_on_read``); ``backends.tf_distribute.values.combine`` is its reduction.

The trap this exercise is about: a replica's slice of an awkward global batch (7 rows on 3
replicas: 3, 3 and 1) may be smaller than the others', or empty. The MEAN of the replicas'
mean losses is then *not* the mean loss of the batch. A correct mean metric keeps two SUM
variables — the total of the losses and the number of examples — and divides on read.

Grade your answer::

    make grade EX=17.2

and read ``solutions/ch17_sync_on_read.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from backends.tf_distribute.values import SyncOnReadVariable, VariableAggregation


def aggregate(aggregation: VariableAggregation, copies: Sequence[Tensor]) -> Tensor:
    """A sync-on-read variable's value read in the cross-replica context: its ``copies``
    (one per replica, same shape) combined by ``aggregation``, as a new tensor on the first
    copy's device (the copies are left as they are)."""
    # ===== EXERCISE 17.2: a sync-on-read metric's value ====================================
    #
    # Points: 6 (in proportion to the tests of ex17_2 that pass; `make grade EX=17.2`)
    #
    # Part 1, aggregate: SUM, MEAN or ONLY_FIRST_REPLICA of the copies, as described above.
    # Return a NEW tensor: a metric read must not change (or share memory with) a copy.
    #
    # Part 2, a mean-loss metric from two SUM variables:
    #   update_state(total, count, per_example_loss) runs INSIDE a replica (strategy.run),
    #     with that replica's per-example losses (possibly none at all): add their sum to
    #     total, their number to count — each replica's own copies (assign_add);
    #   result(total, count) runs OUTSIDE the replicas: read both (read_value) and return
    #     total / count, the mean loss over every example of every replica.
    #
    # Hints:
    #   1. tensor.to(device, copy=True) copies; torch.stack(...).sum(0) adds equal shapes.
    #   2. In update_state, build the deltas as tensors shaped like the variable's copies
    #      (0-dimensional here): per_example_loss.sum() and a tensor of the count.
    #   3. Why not one MEAN variable of each replica's mean loss? Work out 7 rows on 3
    #      replicas with losses 1, 1, 1 | 1, 1, 1 | 8: the batch's mean is 2.
    #
    # What is graded (tests/exercises/test_ch17_sync_on_read.py, `make grade EX=17.2`):
    #   - aggregate equals the lab's combine on random copies for all three aggregations,
    #     leaves the copies unchanged, and as a SyncOnReadVariable's reduction gives the
    #     same reads as the lab's;
    #   - your metric on a MirroredStrategy of 1–4 CPU replicas over a few steps of awkward
    #     batches (empty slices included) reads the mean loss of every example seen, where
    #     a MEAN of per-replica means does not.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 17.2: implement aggregate in "
                              "exercises/ch17_sync_on_read.py")


def update_state(total: SyncOnReadVariable, count: SyncOnReadVariable,
                 per_example_loss: Tensor) -> None:
    """Inside a replica: add this replica's losses and their number (EXERCISE 17.2)."""
    raise NotImplementedError("EXERCISE 17.2: implement update_state in "
                              "exercises/ch17_sync_on_read.py")


def result(total: SyncOnReadVariable, count: SyncOnReadVariable) -> Tensor:
    """Outside the replicas: the mean loss over every example seen (EXERCISE 17.2)."""
    raise NotImplementedError("EXERCISE 17.2: implement result in "
                              "exercises/ch17_sync_on_read.py")
