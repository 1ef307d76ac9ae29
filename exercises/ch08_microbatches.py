"""Chapter 8 exercise: choose the number of micro-batches for a memory budget.

Splitting a mini-batch of ``N`` samples into ``m`` micro-batches shrinks the bubble, and —
depending on the schedule and on activation checkpointing — the activation memory each stage
must hold (textbook chapter 8, "Memory": GPipe keeps every micro-batch's activations until
its backward; 1F1B keeps at most ``p − r`` micro-batches on stage ``r``; a checkpointed
micro-batch keeps only its stage input and recomputes the rest in its backward).

Grade your answer::

    make grade CH=08

and read ``solutions/ch08_microbatches.py`` afterwards.
"""

from __future__ import annotations


def choose_microbatches(batch: int, stages: int, activation_bytes_per_sample: int,
                        input_bytes_per_sample: int, budget_bytes: int, schedule: str,
                        checkpoint: str) -> int | None:
    """The fewest micro-batches whose peak activation memory fits the budget on every stage.

    Args:
        batch: ``N`` samples in the mini-batch; ``m`` must divide it.
        stages: ``p`` equal stages.
        activation_bytes_per_sample: bytes one stage keeps for its backward, per sample,
            without checkpointing.
        input_bytes_per_sample: bytes of one stage's input per sample (what a checkpoint keeps).
        budget_bytes: activation memory available on each stage.
        schedule: ``"gpipe"`` or ``"1f1b"``.
        checkpoint: ``"never"`` or ``"always"``.

    Returns:
        The smallest ``m`` dividing ``batch`` that fits, or ``None`` if none does.
    """
    # ===== EXERCISE 8.2: micro-batches for a memory budget ====================================
    #
    # Points: 6 (in proportion to the tests of ex08_2 that pass; `make grade EX=8.2`)
    #
    # With m micro-batches of s = N/m samples, stage r holds at its peak:
    #   - never:  k_r micro-batches' activations,                k_r · s · a
    #   - always: k_r checkpoints, plus the one micro-batch being recomputed:
    #                                                            k_r · s · i + s · a
    # where k_r is the number of micro-batches in flight on stage r (forward done, backward
    # not yet). Work out k_r for GPipe and for 1F1B (which stage holds the most?), then try
    # the divisors of N from the smallest up.
    #
    # Think first: with GPipe and no checkpointing, does m change the memory at all?
    #
    # What is graded (tests/exercises/test_ch08_microbatches.py, `make grade CH=08`):
    #   - sim vs you: for many (N, p, sizes, budget, schedule, checkpoint), your m is the
    #     smallest divisor whose peak activation memory in the simulated pipeline
    #     (simulator.pipeline.simulate_pipeline) fits the budget on every stage, and None
    #     exactly when no divisor fits.
    # ==========================================================================================
    raise NotImplementedError("EXERCISE 8.2: implement choose_microbatches in "
                              "exercises/ch08_microbatches.py")
