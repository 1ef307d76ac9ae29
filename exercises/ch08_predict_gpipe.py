"""Chapter 8 exercise: predict a GPipe step on this machine, then measure it.

GPipe (Huang et al. 2019; textbook chapter 8) runs every micro-batch forward through the ``p``
stages, then every one backward. Stage ``j`` takes ``t_F,j`` for the forward of one
micro-batch and ``t_B,j`` for its backward, and between two neighbouring stages each
micro-batch's activation (forward) and its gradient (backward, the same size) cross as one
message of ``a`` bytes, costing ``α + a·β``. Here you write the step's prediction from those
numbers; the grader profiles the stages on one process, calibrates α and β, runs the lab's
real pipeline (``backends/pipeline/runtime.py``) and scores your prediction by its error
against what it measures.

Grade your answer::

    make grade EX=8.4

and read ``solutions/ch08_predict_gpipe.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def predict_gpipe_step_s(forward_s: Sequence[float], backward_s: Sequence[float],
                         microbatches: int, activation_bytes: float, alpha_s: float,
                         beta_s_per_B: float) -> float:
    """Predicted time of one GPipe step (every micro-batch forward, then backward), s.

    Args:
        forward_s: ``t_F,j`` of each stage ``j = 0 … p−1`` for one micro-batch, s.
        backward_s: ``t_B,j`` of each stage for one micro-batch, s.
        microbatches: ``m`` ≥ 1.
        activation_bytes: ``a``, the bytes of one micro-batch's activation crossing a
            boundary between two stages (its gradient coming back is as large).
        alpha_s, beta_s_per_B: α (s) and β (s/B) of one message.

    Returns:
        The predicted seconds, a float.
    """
    # ===== EXERCISE 8.4: predict a GPipe step, then measure it ============================
    #
    # Points: 8 (in proportion to the tests of ex08_4 that pass; `make grade EX=8.4`)
    #
    # Follow one micro-batch, then the ones behind it:
    #
    #   - the first micro-batch crosses every stage forward, and the p − 1 boundaries
    #     between them, before the last stage is done with it;
    #   - the others follow it; once the pipeline is full, how often does a micro-batch
    #     leave the last stage? (the slowest stage sets that pace);
    #   - the backward phase starts when the last forward is done, and drains the same way
    #     in the other direction.
    #
    # Hints:
    #   1. With p equal stages and free messages you should get the textbook's
    #      (m + p − 1)·(t_F + t_B): m + p − 1 clock ticks (chapter 8, "The bubble").
    #   2. Unequal stages: the fill and the drain cost the sum over the stages, the m − 1
    #      micro-batches behind the first cost the slowest stage's time each, per phase.
    #   3. Sends do not block (isend): a message delays only the micro-batch it carries,
    #      so it counts on the first micro-batch's path, once per boundary and phase.
    #
    # What is graded (tests/exercises/test_ch08_predict_gpipe.py, `make grade EX=8.4`):
    #   - derive: your formula equals the simulator's closed form of a GPipe step
    #     (simulator/pipeline/simulate.py) on random stage times, m, a, α and β (relative
    #     1e-9), and with equal stages and free messages gives (m + p − 1)·(t_F + t_B);
    #   - measure: the grader profiles each stage of the lab's MLP on one process, calibrates
    #     α and β (a ping-pong, the lab's fit) and runs the real GPipe pipeline at p = 2 and
    #     3 stages, m = 1, 2, 4, in the same launch. Scoring rule: the median
    #     |predicted − measured| / measured of your prediction may reach max(1.5 × e,
    #     e + 0.10), where e is the lab's own error in the same run — the larger median error
    #     of its simulated twin on the textbook cluster (the stages sharing the host's cores)
    #     and of the closed form, from the same profile and calibration. A failure prints
    #     every error.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 8.4: implement predict_gpipe_step_s in "
                              "exercises/ch08_predict_gpipe.py")
