"""Chapter 22 exercise: Switch Transformer's auxiliary load-balancing loss.

A router trained by the task loss alone collapses onto a few experts. Switch (Fedus, Zoph and
Shazeer 2022, §2.2, eqs. 4–6) adds ``α · N · Σ_i f_i · P_i``: ``f_i`` the fraction of the
group's tokens *dispatched* to expert ``i`` (their first choice), ``P_i`` the mean router
probability of expert ``i`` (textbook chapter 22, "The auxiliary load-balancing loss"). It is 1
at uniform routing and grows as the routing concentrates; only ``P`` carries a gradient.

Grade your answer::

    make grade EX=22.3

and read ``solutions/ch22_aux_loss.py`` afterwards.
"""

from __future__ import annotations

import torch


def load_balancing_loss(probs: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """``N · Σ_i f_i · P_i`` of one group (without the weight ``α``).

    Args:
        probs: router probabilities, ``T × N`` (rows sum to 1), possibly requiring grad.
        expert: the chosen experts, ``T × k`` int64, best first (``expert[:, 0]`` is each
            token's first choice).

    Returns:
        A scalar tensor, differentiable with respect to ``probs``.
    """
    # ===== EXERCISE 22.3: the auxiliary load-balancing loss ====================================
    #
    # Points: 6 (in proportion to the tests of ex22_3 that pass; `make grade EX=22.3`)
    #
    # Hints:
    #   1. f is a count: for each expert, the share of the T tokens whose FIRST choice it is —
    #      the other k − 1 choices do not enter it (GShard and Switch count first choices), and
    #      it carries no gradient. one_hot or bincount give it.
    #   2. P is a mean over tokens of the probabilities: a vector of N that sums to 1.
    #   3. Why the factor N? Work out the value at uniform routing with and without it.
    #
    # What is graded (tests/exercises/test_ch22_aux_loss.py):
    #   - value and gradient (through the softmax, to the router logits) equal to the auxiliary
    #     loss of the lab's layer, backends.moe.route, on random logits with k = 1, 2, 3;
    #   - 1 for uniform routing, N when every token goes to one expert with probability 1;
    #   - at least 1 whenever the dispatch fractions equal the probabilities (eq-moe-aux-min).
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 22.3: implement load_balancing_loss in "
                              "exercises/ch22_aux_loss.py, then run `make grade EX=22.3`")
