"""Chapter 3 exercise: predict a parameter-server step on this machine, then measure it.

One server holds the whole model, ``n`` bytes; each of ``w`` workers, every BSP iteration
(textbook chapter 3, "The server bottleneck"), pulls the weights (``n`` bytes from the server),
computes its gradient (``t_c`` seconds) and pushes it (``n`` bytes to the server), and the next
pull waits until every push of the iteration is applied. Here you write the iteration's
prediction from α, β and ``t_c``; the grader calibrates α and β, profiles the gradient on one
process, runs the lab's real parameter server (``backends/parameter_server``) and scores your
prediction by its error against what it measures.

Grade your answer::

    make grade EX=3.4

and read ``solutions/ch03_predict_ps.py`` afterwards.
"""

from __future__ import annotations


def predict_ps_step_s(workers: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                      compute_s: float) -> float:
    """Predicted time of one BSP iteration on one server and ``workers`` workers, s.

    Args:
        workers: ``w`` ≥ 1.
        nbytes: ``n``, the model's bytes (what one pull or one push carries).
        alpha_s, beta_s_per_B: α (s) and β (s/B) of one message.
        compute_s: ``t_c``, one worker's gradient computation per iteration, s.

    Returns:
        The predicted seconds, a float.
    """
    # ===== EXERCISE 3.4: predict a parameter-server step, then measure it =================
    #
    # Points: 8 (in proportion to the tests of ex03_4 that pass; `make grade EX=3.4`)
    #
    # Find the busiest link and count what crosses it in one iteration:
    #
    #   - which node does every pull and every push go through, and how many bytes cross
    #     its link in each phase?
    #   - this lab's van (backends/parameter_server/van.py) sends with blocking gloo sends
    #     and each node has ONE receiving thread: how many messages does that link move,
    #     one after another, and what does each cost in latency?
    #   - BSP: can the pull of the next iteration overlap the computation? (textbook
    #     eq-ps-step, "without overlap").
    #
    # Hints:
    #   1. Start from the textbook's eq-ps-comm with S = 1 server and add one α per
    #      message the server's link moves.
    #   2. Check yourself on the textbook's worked example: W = 8, M = 400 MB,
    #      B = 1.25 GB/s, T_c = 1 s, one server, α = 0: 6.12 s.
    #
    # What is graded (tests/exercises/test_ch03_predict_ps.py, `make grade EX=3.4`):
    #   - derive: the textbook's worked example; with free messages the iteration is the
    #     computation; the communication doubles with the workers; with empty messages it is
    #     the latencies of the messages through the server;
    #   - measure: the grader calibrates α and β (a ping-pong, the lab's fit) at 1 + 1 + w
    #     processes, profiles the gradient on one process and runs the real parameter
    #     server (BSP, the lab's small MLP at three widths, 11–180 KB) with w = 1 and 2 in
    #     the same launch. Scoring rule: the median |predicted − measured| / measured of your
    #     prediction may reach max(1.5 × e, e + 0.10), where e is the lab's own error in the
    #     same run — the larger median error of its simulated twin on the textbook cluster
    #     (with the code's costs profiled on one process) and of the textbook's formula,
    #     from the same calibration. A failure prints every error.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 3.4: implement predict_ps_step_s in "
                              "exercises/ch03_predict_ps.py")
