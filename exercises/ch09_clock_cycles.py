"""Chapter 9 exercise: torchgpipe's clock — which tasks run at each tick.

torchgpipe does not run a scheduler: a fixed clock says, at each tick, which (micro-batch,
partition) pairs may run in parallel, the diagonal wave of GPipe's figure (Kim et al. 2020,
§3.2; textbook chapter 9, "Execution order"). With ``m`` micro-batches and ``n`` partitions::

    tick:         0      1      2      3      4      5
    partition 0: (0,0)  (1,0)  (2,0)  (3,0)
    partition 1:        (0,1)  (1,1)  (2,1)  (3,1)
    partition 2:               (0,2)  (1,2)  (2,2)  (3,2)

Here you generate that table.

Grade your answer::

    make grade EX=9.2

and read ``solutions/ch09_clock_cycles.py`` afterwards.
"""

from __future__ import annotations


def clock_cycles(m: int, n: int) -> list[list[tuple[int, int]]]:
    """The forward clock: for each tick, the ``(micro-batch, partition)`` pairs that run then.

    Args:
        m: micro-batches (≥ 1).
        n: partitions (≥ 1).

    Returns:
        One list per tick, in tick order; within a tick, pairs ordered by partition, lowest
        first. ``clock_cycles(2, 2) == [[(0, 0)], [(1, 0), (0, 1)], [(1, 1)]]``.
    """
    # ===== EXERCISE 9.2: torchgpipe's clock cycles ============================================
    #
    # Points: 6 (in proportion to the tests of ex09_2 that pass; `make grade EX=9.2`)
    #
    # Hints:
    #   1. Micro-batch i reaches partition j after i + j ticks. What do all the pairs in one
    #      column of the table have in common?
    #   2. How many ticks are there in all? For a given tick k, which partitions j have a
    #      valid micro-batch i (0 ≤ i < m)? Derive the range of j from both bounds.
    #   3. Check m < n, m = n and m > n: the table is a parallelogram only when m ≥ n.
    #
    # What is graded (tests/exercises/test_ch09_clock_cycles.py):
    #   - the table above, literally;
    #   - equal to simulator.pipeline.schedules.synchronous.clock_cycles for all m, n ≤ 12;
    #   - every pair appears exactly once, and (i, j) runs after (i, j − 1) and (i − 1, j).
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 9.2: implement clock_cycles in "
                              "exercises/ch09_clock_cycles.py, then run `make grade EX=9.2`")
