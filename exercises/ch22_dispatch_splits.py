"""Chapter 22 exercise: the split sizes of the dispatch all-to-all, from the routing table.

With expert parallelism rank ``j`` of ``p`` holds experts ``j·m … (j+1)·m − 1`` (``m = E/p``),
and every rank routes its own group of tokens (textbook chapter 22, "Experts sharded over
ranks"). The dispatch is an all-to-all with *uneven* pieces: rank ``r`` sends rank ``j`` the
rows routed to ``j``'s experts. A receiver must know its sizes before the rows come, which is
why a count exchange runs first ("Uneven all-to-all and why counts go first").

Grade your answer::

    make grade EX=22.2

and read ``solutions/ch22_dispatch_splits.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def dispatch_splits(counts: Sequence[Sequence[int]], rank: int
                    ) -> tuple[list[int], list[int]]:
    """Rank ``rank``'s split sizes in the dispatch all-to-all.

    Args:
        counts: the routing table, ``p`` rows of ``E`` integers: ``counts[s][e]`` is how many
            of rank ``s``'s tokens expert ``e`` keeps (after the capacity). ``p = len(counts)``
            divides ``E``.
        rank: ``0 ≤ rank < p``.

    Returns:
        ``(input_splits, output_splits)`` as ``dist.all_to_all_single`` takes them:
        ``input_splits[j]`` rows this rank sends to rank ``j`` and ``output_splits[s]`` rows it
        receives from rank ``s`` (its own piece included, at ``j = s = rank``).
    """
    # ===== EXERCISE 22.2: the dispatch's send and receive counts ===============================
    #
    # Points: 8 (in proportion to the tests of ex22_2 that pass; `make grade EX=22.2`)
    #
    # Hints:
    #   1. Which experts live on rank j? Slice a row of the table by that block.
    #   2. What this rank sends depends on one row of the table (its own routing); what it
    #      receives depends on one block of columns (its own experts) of every row. Which of
    #      the two does a rank know without the count exchange?
    #   3. Check with the textbook's example (p = 2, E = 4): rank 1's row is [2, 0, 1, 1].
    #   The combine all-to-all that brings the outputs home has the same two lists, swapped.
    #
    # What is graded (tests/exercises/test_ch22_dispatch_splits.py):
    #   - the textbook's two-rank example, literally;
    #   - random tables, p from 1 to 4: the rows each rank sends each other rank equal the
    #     simulator's exchange_bytes (simulator/moe.py) divided by the bytes of a row, and
    #     every row sent is received;
    #   - on 2 and 3 real processes: your splits, computed from the routing table of the lab's
    #     ExpertParallelMoE (backends/moe/parallel.py), equal the splits its real dispatch uses.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 22.2: implement dispatch_splits in "
                              "exercises/ch22_dispatch_splits.py, then run "
                              "`make grade EX=22.2`")
