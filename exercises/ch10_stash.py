"""Chapter 10 exercise: how many micro-batches a 1F1B stage stashes.

In 1F1B (PipeDream's steady state, textbook chapter 10, "1F1B" and "Weight stashing"), each
stage runs a few forward passes to fill the pipeline, then alternates one forward and one
backward. Every forward whose backward has not run yet keeps its activations (and, in
PipeDream, its weight version) alive. Here you count the most a stage holds at once — what
sets its memory.

Grade your answer::

    make grade EX=10.3

and read ``solutions/ch10_stash.py`` afterwards.
"""

from __future__ import annotations


def stashed_microbatches(stages: int, microbatches: int, stage: int) -> int:
    """The most micro-batches whose forward ran and backward has not, at once, on ``stage``.

    Args:
        stages: ``p`` (≥ 1).
        microbatches: ``m`` (≥ 1).
        stage: ``s``, 0 for the first stage, ``p − 1`` for the last.
    """
    # ===== EXERCISE 10.3: 1F1B's stash per stage ==============================================
    #
    # Points: 4 (in proportion to the tests of ex10_3 that pass; `make grade EX=10.3`)
    #
    # Hints:
    #   1. The last stage runs a micro-batch's backward right after its forward. How many does
    #      it hold? Now the stage before it: how many forwards does it run before the first
    #      gradient comes back from the last stage?
    #   2. Draw the schedule for p = 4, m = 8 (simulator.pipeline.schedules.critical_path.draw
    #      does it for you) and count per row.
    #   3. What changes when m is smaller than the number of warm-up forwards?
    #
    # What is graded (tests/exercises/test_ch10_stash.py):
    #   - equal to the in-flight count of the simulator's 1F1B schedule, for every stage of
    #     every p ≤ 10, m ≤ 20.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 10.3: implement stashed_microbatches in "
                              "exercises/ch10_stash.py, then run `make grade EX=10.3`")
