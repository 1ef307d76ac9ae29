"""Chapter 22 exercise: top-k routing with a capacity — which assignments an expert keeps.

A mixture-of-experts router sends each of a group's ``T`` tokens to ``k`` of ``E`` experts, and
each expert takes at most ``C = ⌈c_f · T · k / E⌉`` of them (textbook chapter 22, "Capacity and
dropped tokens"; Switch Transformer §2.2, GShard §2.2). The rest are *dropped*. Which ones are
dropped is a convention, and the lab follows GShard's Algorithm 1: every token's first choice,
in token order, is counted before any second choice.

Grade your answer::

    make grade EX=22.1

and read ``solutions/ch22_capacity.py`` afterwards.
"""

from __future__ import annotations

import torch


def route_tokens(logits: torch.Tensor, k: int, capacity_factor: float
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-``k`` routing of one group with a capacity per expert.

    Args:
        logits: router scores, ``T × E`` (float); token ``t`` prefers the experts of largest
            ``logits[t]``.
        k: experts per token, ``1 ≤ k ≤ E``.
        capacity_factor: ``c_f > 0``.

    Returns:
        ``(expert, kept, counts)``: ``expert`` the chosen experts, ``T × k`` int64, best first;
        ``kept`` (``T × k`` bool) whether each assignment fits in its expert's capacity;
        ``counts`` (``E`` int64) the assignments each expert keeps.
    """
    # ===== EXERCISE 22.1: top-k routing with capacity ==========================================
    #
    # Points: 8 (in proportion to the tests of ex22_1 that pass; `make grade EX=22.1`)
    #
    # Write three steps:
    #   1. the top k: the router's probabilities are a softmax of the logits, but does the
    #      softmax change which experts are largest? torch.topk returns them best first.
    #   2. the capacity C of eq. (eq-moe-capacity): a ceiling, of a product that uses the whole
    #      group's T·k assignments, not one token's.
    #   3. the counting order. Lay the T·k assignments out choice by choice: all first choices
    #      (token 0, 1, …), then all second choices, … . An assignment's *slot* is how many
    #      earlier assignments in that order went to the same expert; it is kept iff slot < C.
    #      A running count per expert does it; so does a cumulative sum over one-hot rows.
    #   Counting token by token instead (token 0's choices, then token 1's, …) is a different
    #   convention and drops different assignments: the grader sees it.
    #
    # What is graded (tests/exercises/test_ch22_capacity.py):
    #   - a small literal group where first choices must be counted before second choices;
    #   - random logits (T from 1 to 40, E from 2 to 8, k from 1 to 3, c_f from 0.25 to 2):
    #     expert, kept and counts equal those of the lab's layer, backends.moe.route;
    #   - Switch's example (1024 tokens, 8 experts, 30 % preferring expert 0): your counts and
    #     drops equal the simulator's routing_histogram (simulator/moe.py).
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 22.1: implement route_tokens in "
                              "exercises/ch22_capacity.py, then run `make grade EX=22.1`")
