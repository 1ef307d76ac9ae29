"""Chapter 23 exercise: peak activations per rank for 1F1B, ZB-H1 and ZB-V.

Splitting the backward costs memory, not computation: ``W`` still needs a micro-batch's saved
activations, so they live from its ``F`` until its ``W`` (or a fused ``B``) (textbook chapter
23, "Memory"; Qi et al. 2024). Deferring ``W`` defers the free — yet ZB-H1 and ZB-V keep
1F1B's peak.

Grade your answer::

    make grade EX=23.3

and read ``solutions/ch23_in_flight.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def in_flight(actions: Sequence[tuple[str, int, int]]) -> int:
    """The most ``(micro-batch, chunk)`` pairs one rank holds activations for at once.

    Args:
        actions: the rank's actions in order, ``(kind, microbatch, chunk)``; ``kind`` is
            ``"F"``, ``"I"``, ``"W"`` or ``"B"`` (fused ``I`` + ``W``).
    """
    # ===== EXERCISE 23.3: peak in-flight activations ===========================================
    #
    # Points: 6 (in proportion to the tests of ex23_3 that pass; `make grade EX=23.3`)
    #
    # Part 1, in_flight: walk the actions once. Which kinds allocate, which free, and which
    # (careful) do neither?
    # Part 2, peak_in_flight: a closed form per schedule, in units of one stage's activations
    # of one micro-batch for 1F1B and ZB-H1 and of one CHUNK's (half a stage) for ZB-V:
    #   - 1F1B: stage r's warm-up plus the forward that opens its steady state — and m < p?
    #   - ZB-H1: stage r holds its r deferred W's on top of 1F1B's count.
    #   - ZB-V (m ≥ 2p − 1 only): both chunks of rank r together; read the phases in the
    #     docstring of simulator.pipeline.schedules.zero_bubble.zb_v, or count with your
    #     in_flight on zb_v's lists and look for the pattern.
    #
    # What is graded (tests/exercises/test_ch23_in_flight.py):
    #   - in_flight equals the simulator's in_flight_split on every rank of 1F1B, ZB-H1, ZB-V
    #     and DualPipe-V schedules, p = 1 … 5;
    #   - peak_in_flight equals in_flight_split of the lab's schedules for every rank:
    #     1F1B and ZB-H1 for p = 1 … 6, m = 1 … 12, ZB-V for m = 2p − 1 … 12.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 23.3: implement in_flight in "
                              "exercises/ch23_in_flight.py, then run `make grade EX=23.3`")


def peak_in_flight(schedule: str, stages: int, microbatches: int, rank: int) -> int:
    """Rank ``rank``'s peak in-flight count for ``schedule`` (``"1f1b"``, ``"zb_h1"`` or
    ``"zbv"``) with ``p = stages`` and ``m = microbatches``, by formula."""
    # EXERCISE 23.3 (continued): Part 2 above.
    raise NotImplementedError("EXERCISE 23.3: implement peak_in_flight in "
                              "exercises/ch23_in_flight.py, then run `make grade EX=23.3`")
