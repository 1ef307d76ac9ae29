"""Chapter 11 exercise: what a stage boundary costs — the communication module's two transfers.

When a stage boundary follows layer ``i``, PipeDream's communication module sends the layer's
output activation forward and, later, its gradient (same shape, same bytes) backward (textbook
chapter 11, "Sending and receiving"). The planner charges each boundary ``C_i`` for that pair of
transfers (Narayanan et al. 2019, §3.1). Here you write ``C_i``.

Grade your answer::

    make grade EX=11.2

and read ``solutions/ch11_boundary.py`` afterwards.
"""

from __future__ import annotations


def boundary_time(output_bytes: int, bandwidth_Bps: float, latency_s: float = 0.0,
                  full_duplex: bool = False) -> float:
    """Time a boundary costs per input, s: the activation forward plus its gradient backward.

    Args:
        output_bytes: bytes of the activation crossing the boundary, per input.
        bandwidth_Bps: the link's bandwidth, bytes/s.
        latency_s: its latency α per message, s.
        full_duplex: whether the link carries both directions at once at full bandwidth.
    """
    # ===== EXERCISE 11.2: the cost of a stage boundary ========================================
    #
    # Points: 4 (in proportion to the tests of ex11_2 that pass; `make grade EX=11.2`)
    #
    # Hints:
    #   1. How many bytes does the gradient of an activation have?
    #   2. Each transfer is one message in the α-β model. On a half-duplex link the two
    #      directions take turns; on a full-duplex link, in steady state, do they?
    #
    # What is graded (tests/exercises/test_ch11_boundary.py):
    #   - equal to simulator.pipeline.planner.boundary_time for random sizes and links, both
    #     duplex modes.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 11.2: implement boundary_time in "
                              "exercises/ch11_boundary.py, then run `make grade EX=11.2`")
