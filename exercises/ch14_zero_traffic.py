"""Chapter 14 exercise: what ZeRO costs on the wire — bytes each rank sends per step.

Data parallelism all-reduces the gradients every step. ZeRO stages 1 and 2 split that
all-reduce into its two halves — a reduce-scatter of the gradients and an all-gather of the
updated parameters — and stage 3 gathers the parameters twice (forward and backward) and
reduce-scatters the gradients (Rajbhandari et al. 2020, §7; textbook chapter 14,
"Communication: why stages 1 and 2 are free" and "The 1.5× communication"). Here you count the
bytes one rank sends, with ring collectives.

Grade your answer::

    make grade EX=14.3

and read ``solutions/ch14_zero_traffic.py`` afterwards.
"""

from __future__ import annotations


def communication_bytes(params: int, stage: int, dp: int, precision: str = "mixed") -> float:
    """Bytes each rank sends in one training step, ring collectives, ZeRO ``stage`` 0–3.

    Args:
        params: ``Ψ``, the model's parameters.
        stage: 0 (plain data parallelism), 1, 2 or 3.
        dp: ``N_d``, data-parallel ranks (≥ 1).
        precision: ``"mixed"`` (gradients and parameters travel in fp16, 2 bytes each) or
            ``"fp32"`` (4 bytes each).
    """
    # ===== EXERCISE 14.3: ZeRO's communication volume ==========================================
    #
    # Points: 6 (in proportion to the tests of ex14_3 that pass; `make grade EX=14.3`)
    #
    # Hints:
    #   1. A ring reduce-scatter or all-gather of an n-byte buffer on N_d ranks: how many steps,
    #      and how many bytes does one rank send per step? An all-reduce is the two in a row.
    #   2. List the collectives of a step for each stage, with the buffer each one moves
    #      (gradients or parameters, and in which precision). Which stages list the same ones?
    #   3. The optimizer states never travel. Only the training precision's copies do.
    #
    # What is graded (tests/exercises/test_ch14_zero_traffic.py):
    #   - equal to simulator.zero.communication_bytes for random Ψ, stage, N_d and precision;
    #   - stage 3 sends 1.5 times what stage 0 sends.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 14.3: implement communication_bytes in "
                              "exercises/ch14_zero_traffic.py, then run `make grade EX=14.3`")
