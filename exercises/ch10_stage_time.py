"""Chapter 10 exercise: the time of a replicated stage in PipeDream's planner.

PipeDream's optimizer may give a stage ``r`` replicas that take turns with inputs, so each
replica sees one input in ``r``; the replicas must all-reduce the stage's weights, and the
planner assumes that all-reduce overlaps the compute (Narayanan et al. 2019, §3.1; textbook
chapter 10, "Computing partitions"). Here you write ``T(i→j, r)``, the stage's time per
input.

Grade your answer::

    make grade EX=10.2

and read ``solutions/ch10_stage_time.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def stage_time(compute_s: Sequence[float], parameter_bytes: Sequence[int], replicas: int,
               bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Per-input time of a stage of some layers on ``replicas`` devices, s.

    Args:
        compute_s: each layer's forward + backward time for one input, s.
        parameter_bytes: each layer's parameter bytes (what the replicas all-reduce).
        replicas: ``r`` ≥ 1.
        bandwidth_Bps: bandwidth between replicas, bytes/s (β = 1/bandwidth).
        latency_s: latency α per message, s.
    """
    # ===== EXERCISE 10.2: PipeDream's stage time ==============================================
    #
    # Points: 6 (in proportion to the tests of ex10_2 that pass; `make grade EX=10.2`)
    #
    # Hints:
    #   1. Two costs per round of r inputs (one per replica): the compute of one input on each
    #      replica, and the weight synchronisation, a ring all-reduce of the stage's parameters
    #      among the r replicas (chapter 2's cost; zero when r = 1).
    #   2. The planner assumes they overlap: which of the two sets the pace?
    #   3. A round handles r inputs: divide to get the time per input.
    #
    # What is graded (tests/exercises/test_ch10_stage_time.py):
    #   - equal to simulator.pipeline.planner.stage_time on random profiles and replica counts.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 10.2: implement stage_time in "
                              "exercises/ch10_stage_time.py, then run `make grade EX=10.2`")
