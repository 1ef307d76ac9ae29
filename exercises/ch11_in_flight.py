"""Chapter 11 exercise: the runtime's stash — how many micro-batches a rank keeps alive.

PipeDream's runtime keeps, for every micro-batch whose forward ran and whose backward has not,
its input activation and (with weight stashing) the weight version it used (textbook chapter 11,
"Implementation"; chapter 10, "Weight stashing"). Given the exact sequence of a rank's actions,
you can count the most it ever holds at once — for any schedule: GPipe, 1F1B, interleaved.

Grade your answer::

    make grade EX=11.3

and read ``solutions/ch11_in_flight.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def peak_stash(actions: Sequence[tuple[str, int, int]]) -> int:
    """The most ``(micro-batch, chunk)`` pairs stashed at once by one rank.

    Args:
        actions: the rank's actions in order, each ``(kind, microbatch, chunk)``: ``kind`` is
            ``"F"`` (forward, which stashes) or ``"B"`` (backward, which frees the stash of
            the same micro-batch and chunk); ``chunk`` is 0 unless the schedule interleaves.

    Returns:
        The peak number of stashed pairs (0 for no actions).
    """
    # ===== EXERCISE 11.3: the peak stash of a schedule =========================================
    #
    # Points: 6 (in proportion to the tests of ex11_3 that pass; `make grade EX=11.3`)
    #
    # Hints:
    #   1. Walk the actions once, keeping what is stashed now. Which data structure lets a
    #      backward find and free its own forward's entry, whatever order they come in?
    #   2. With interleaving one micro-batch is stashed once per chunk: what must the key be?
    #   3. When do you take the maximum: after a forward, after a backward, or both?
    #
    # What is graded (tests/exercises/test_ch11_in_flight.py):
    #   - equal to the simulator's in_flight (simulator.pipeline.schedules.critical_path) on
    #     every rank of GPipe, 1F1B and interleaved 1F1B schedules;
    #   - 1F1B's stage s stashes min(m, p − s), GPipe's stashes m.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 11.3: implement peak_stash in "
                              "exercises/ch11_in_flight.py, then run `make grade EX=11.3`")
