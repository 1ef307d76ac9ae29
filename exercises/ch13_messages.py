"""Chapter 13 exercise: count the messages of one RPC training step.

A driver trains a model split into ``k`` stages on ``k`` workers with RPC, distributed autograd
and the distributed optimizer (textbook chapter 13, "Distributed autograd" and "The cost of a
split step"). Each message pays at least the RPC layer's latency, so their number — not only
their bytes — sets the step time of small models. Here you count them, phase by phase.

Grade your answer::

    make grade EX=13.1

and read ``solutions/ch13_messages.py`` afterwards.
"""

from __future__ import annotations


def message_count(stages: int) -> dict[str, int]:
    """Messages one step sends, by phase.

    Args:
        stages: ``k`` ≥ 1 workers, one stage each.

    Returns:
        ``{"forward": …, "backward": …, "acknowledgements": …, "optimizer": …, "total": …}``:
        forward calls (requests and responses); the gradients of FAST-mode backward; the
        answers that unwind backward's nested requests; ``DistributedOptimizer.step``'s calls;
        and their sum.
    """
    # ===== EXERCISE 13.1: messages of a split step ============================================
    #
    # Points: 4 (in proportion to the tests of ex13_1 that pass; `make grade EX=13.1`)
    #
    # Hints:
    #   1. Forward: every stage is one rpc_sync from the driver. How many messages is one call?
    #   2. Backward (FAST mode): the driver sends stage k's output gradient to worker k; each
    #      worker sends its input's gradient back to the driver, which forwards it to the
    #      previous worker. Which stage's input needs no gradient?
    #   3. Every propagate-gradients request is answered once its whole nested part is done.
    #   4. The optimizer asks every worker to step, and every worker answers.
    #
    # What is graded (tests/exercises/test_ch13_messages.py):
    #   - equal to simulator.rpc.message_count for k = 1 … 64;
    #   - the total equals the number of messages the simulated step (simulator.rpc) sends.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 13.1: implement message_count in "
                              "exercises/ch13_messages.py, then run `make grade EX=13.1`")
