"""Chapter 7 exercise: the fusion threshold Horovod really uses.

``HOROVOD_FUSION_THRESHOLD`` sets the size of the fusion buffer, but the engine does not use
the number as given: it rounds it so that the buffer splits evenly among the ranks of a machine,
in whole atomic units of 64 doubles (``Controller::TensorFusionThresholdBytes``; textbook
chapter 7, "The fusion framework"). Here you write that rounding.

Grade your answer::

    make grade EX=7.3

and read ``solutions/ch07_threshold.py`` afterwards.
"""

from __future__ import annotations


def effective_threshold(threshold_bytes: int, local_size: int) -> int:
    """The fusion threshold the engine uses, bytes.

    Args:
        threshold_bytes: ``HOROVOD_FUSION_THRESHOLD``, bytes (≥ 0; 0 turns fusion off).
        local_size: ranks on this machine (≥ 1; treat 0 as 1).

    Returns:
        The smallest multiple of ``local_size × 8 B × 64`` that is ≥ ``threshold_bytes``.
    """
    # ===== EXERCISE 7.3: the effective fusion threshold =======================================
    #
    # Points: 4 (in proportion to the tests of ex07_3 that pass; `make grade EX=7.3`)
    #
    # Hints:
    #   1. The unit is what each of the machine's ranks must get a whole number of: 64 values of
    #      8 bytes each, per local rank.
    #   2. Rounding *up* to a multiple with integers only: no floats (a 64 MiB threshold must
    #      come out exact), and think about what happens exactly on a multiple and at 0.
    #
    # What is graded (tests/exercises/test_ch07_threshold.py):
    #   - equal to simulator.horovod.fusion.effective_threshold for random thresholds and
    #     local sizes, including 0 and exact multiples.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 7.3: implement effective_threshold in "
                              "exercises/ch07_threshold.py, then run `make grade EX=7.3`")
