"""Chapter 11 exercise: how many weight versions PipeDream's runtime must stash.

Asynchronous PipeDream (Narayanan et al., SOSP 2019; textbook chapters 10–11, "Weight
stashing") updates a stage's weights after every backward, with no flush. A micro-batch's
backward must use the same weights as its forward, so the runtime stashes a copy of the weights
each forward used until that micro-batch's backward has run.

Grade your answer::

    make grade CH=11

and read ``solutions/ch11_weight_versions.py`` afterwards.
"""

from __future__ import annotations


def stashed_versions(stages: int, microbatches: int) -> list[int]:
    """For each stage, the most weight versions it holds at once in asynchronous 1F1B.

    Args:
        stages: ``p`` ≥ 1.
        microbatches: ``m`` ≥ 1 inputs streamed through the pipeline.

    Returns:
        ``p`` integers: for stage ``r``, the most distinct weight versions alive at once —
        the current weights plus every older version an in-flight micro-batch still needs.
    """
    # ===== EXERCISE 11.1: weight versions =====================================================
    #
    # Points: 6 (in proportion to the tests of ex11_1 that pass; `make grade EX=11.1`)
    #
    # Replay stage r's 1F1B actions (exercise 10.1 gives them; without a flush the order is
    # the same). Keep a version counter (incremented after each backward: the update) and,
    # for each micro-batch, the version its forward used. After each action, count the
    # versions still needed: the current one, and those of micro-batches whose forward has run
    # but whose backward has not. Return the maximum over the run.
    #
    # Check: once the pipeline is full (m ≥ 2p − 1) stage r holds p − r versions.
    #
    # What is graded (tests/exercises/test_ch11_weight_versions.py, `make grade CH=11`):
    #   - p − r for every stage once m ≥ 2p − 1, for p = 1 … 8;
    #   - for every m, the same counts as the simulator's PipeDream
    #     (simulator.pipeline.schedules.pipedream_async(...).stashed).
    # ==========================================================================================
    raise NotImplementedError("EXERCISE 11.1: implement stashed_versions in "
                              "exercises/ch11_weight_versions.py")
