"""Chapter 1 exercise: how many days does training take? The FLOP count of a step.

A dense transformer with ``P`` parameters spends a fixed number of floating-point operations per
parameter per token (textbook chapter 1, "Compute: the 6NT rule"). Multiply by the tokens ``T``
of the training run and divide by what ``n`` GPUs sustain at ``X`` FLOP/s each, and you have the
end-to-end time (Narayanan et al. 2021, §5.1).

Grade your answer::

    make grade EX=1.3

and read ``solutions/ch01_training_days.py`` afterwards.
"""

from __future__ import annotations


def training_days(tokens: float, params: float, gpus: int, flops_per_gpu: float) -> float:
    """End-to-end training time, days, with activation recomputation.

    Args:
        tokens: ``T``, tokens the run trains on.
        params: ``P``, the model's parameters.
        gpus: ``n``, GPUs (≥ 1).
        flops_per_gpu: ``X``, FLOP/s each GPU sustains (not its peak).

    Returns:
        The time in days (86 400 s each).
    """
    # ===== EXERCISE 1.3: training time from the FLOP count ====================================
    #
    # Points: 4 (in proportion to the tests of ex01_3 that pass; `make grade EX=1.3`)
    #
    # Hints:
    #   1. One parameter meets one token in one multiply and one add in the forward pass. How
    #      many FLOPs is that?
    #   2. The backward pass computes two gradients per weight use (for the input and for the
    #      weight): how does its cost compare with the forward's?
    #   3. With full recomputation the forward pass runs once more before the backward pass.
    #      Add it up per parameter per token, then convert seconds to days.
    #
    # What is graded (tests/exercises/test_ch01_training_days.py):
    #   - equal to simulator.transformer.training_days on random inputs;
    #   - the GPT-3 sanity check of the textbook: 175 B parameters, 300 B tokens, 1024 GPUs at
    #     140 TFLOP/s take about a month.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 1.3: implement training_days in "
                              "exercises/ch01_training_days.py, then run `make grade EX=1.3`")
