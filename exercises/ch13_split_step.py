"""Chapter 13 exercise: the time of one RPC training step of a split model.

With RPC the driver sends every activation to the next worker and receives it back, backward
passes every gradient through the driver, and only one stage works at a time (textbook chapter
13, "The cost of a split step", eq. eq-rpc-split-step). Here you write the step's time in the
α-β model, phase by phase.

Grade your answer::

    make grade EX=13.2

and read ``solutions/ch13_split_step.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def split_step_time(stages: Sequence[tuple[float, float, float, int, int]], alpha_s: float,
                    beta_s_per_B: float, loss_s: float = 0.0) -> float:
    """One step's time, s, on links that never contend.

    Args:
        stages: per stage ``i`` (in model order) ``(forward_s, backward_s, update_s,
            input_bytes, output_bytes)``: its compute times, s, and the activation it receives
            and returns (the gradients have the same sizes), bytes.
        alpha_s: α of one RPC message (wire latency plus the RPC layer's overhead), s.
        beta_s_per_B: β, s/B.
        loss_s: the driver's loss computation between forward and backward, s.
    """
    # ===== EXERCISE 13.2: the split step's time ===============================================
    #
    # Points: 8 (in proportion to the tests of ex13_2 that pass; `make grade EX=13.2`)
    #
    # Hints:
    #   1. Everything but the optimizer is serial: add up the phases.
    #   2. Forward: per stage, a request carrying its input, its compute, a response carrying
    #      its output.
    #   3. Backward: per stage, its output's gradient goes from the driver to it, it computes,
    #      and (except the first stage) its input's gradient returns to the driver.
    #   4. Acknowledgements unwind the nested requests; they carry no payload. Count them with
    #      exercise 13.1.
    #   5. The optimizer: all workers at once. What does the driver wait for?
    #
    # What is graded (tests/exercises/test_ch13_split_step.py):
    #   - equal to simulator.rpc.split_step_cost on random stages;
    #   - equal to the makespan of the simulated step (simulator.rpc.simulate_split_step).
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 13.2: implement split_step_time in "
                              "exercises/ch13_split_step.py, then run `make grade EX=13.2`")
