"""Chapter 3, reference answer: a BSP parameter-server iteration predicted from α, β and t_c.

The exercise is in ``exercises/ch03_predict_ps.py``; the textbook's model is eq-ps-comm and
eq-ps-step (chapter 3, without overlap), with one α per message through the server's link.
"""

from __future__ import annotations


def predict_ps_step_s(workers: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                      compute_s: float) -> float:
    """Predicted time of one BSP iteration on one server and ``workers`` workers, s::

        t_c + 2·w·(α + n·β)
    """
    # The server's link carries every pull and every push, one message at a time (blocking
    # sends, one receiving thread): w messages of n bytes in each of the two phases.
    server_link_s = 2 * workers * (alpha_s + nbytes * beta_s_per_B)
    return compute_s + server_link_s  # BSP: the pull waits for the update, no overlap
