"""Chapter 8, reference answer: a GPipe step predicted from the stages' times and α, β.

The exercise is in ``exercises/ch08_predict_gpipe.py``; the simulator's closed form is
``gpipe_time`` in ``simulator/pipeline/simulate.py`` (Huang et al. 2019, §2.3; torchgpipe's
``m + n − 1`` clock cycles, Kim et al. 2020).
"""

from __future__ import annotations

from collections.abc import Sequence


def predict_gpipe_step_s(forward_s: Sequence[float], backward_s: Sequence[float],
                         microbatches: int, activation_bytes: float, alpha_s: float,
                         beta_s_per_B: float) -> float:
    """Predicted time of one GPipe step, s::

        Σ_j (t_F,j + t_B,j) + 2·(p − 1)·(α + a·β) + (m − 1)·(max_j t_F,j + max_j t_B,j)
    """
    boundaries = len(forward_s) - 1
    message_s = alpha_s + activation_bytes * beta_s_per_B
    first = sum(forward_s) + sum(backward_s) + 2 * boundaries * message_s  # fill and drain
    behind = (microbatches - 1) * (max(forward_s) + max(backward_s))  # the slowest stage's pace
    return first + behind
