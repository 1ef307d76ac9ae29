"""Chapter 2 exercise: predict the ring all-reduce on this machine, then measure it.

The ring all-reduce (textbook chapter 2, "Ring all-reduce") is a reduce-scatter followed by an
all-gather, each ``p − 1`` steps round a ring of ``p`` ranks, every step moving one chunk of
``n/p`` bytes per rank. In the α-β-γ model a message of ``m`` bytes costs ``α + m·β`` (α the
latency, s; β the time per byte, s/B) and reducing ``m`` bytes costs ``m·γ`` (γ, s/B). Here you
write the prediction from those three numbers; the grader calibrates them on your machine,
runs the lab's real ring (``backends/collectives/all_reduce.py``) and scores your prediction
by its error against what it measures.

Grade your answer::

    make grade EX=2.5

and read ``solutions/ch02_predict_ring.py`` afterwards.
"""

from __future__ import annotations


def predict_ring_all_reduce_s(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float,
                              gamma_s_per_B: float) -> float:
    """Predicted time of one ring all-reduce of ``nbytes`` on ``p`` ranks, s.

    Args:
        p: ranks in the ring (≥ 1).
        nbytes: bytes of the buffer every rank contributes (and gets back reduced).
        alpha_s: α, the latency of one message, s.
        beta_s_per_B: β, the time per byte of a message, s/B.
        gamma_s_per_B: γ, the time to reduce (add) one byte, s/B.

    Returns:
        The predicted seconds, a float (0 for a single rank: there is nothing to exchange).
    """
    # ===== EXERCISE 2.5: predict the ring all-reduce, then measure it ======================
    #
    # Points: 8 (in proportion to the tests of ex02_5 that pass; `make grade EX=2.5`)
    #
    # Derive the ring's time from its schedule, then write it down:
    #
    #   - how many steps do the two phases take together, and what does each step cost in
    #     latency (every rank sends one message and receives one, at the same time)?
    #   - how many bytes does one rank send in all? (a chunk is n/p bytes);
    #   - in which phase are the received chunks added to the rank's own, and how many
    #     bytes does one rank add in all?
    #
    # Hints:
    #   1. Draw p = 3 on paper: three chunks, two steps of reduce-scatter, two of all-gather.
    #      Count per rank, not for the whole ring: the ranks work at the same time.
    #   2. The all-gather copies finished chunks; only the reduce-scatter reduces.
    #   3. Check yourself: at p = 2 a rank sends half the buffer twice and adds half of it
    #      once; as p grows, the bytes a rank sends approach 2n, never more.
    #
    # What is graded (tests/exercises/test_ch02_predict_ring.py, `make grade EX=2.5`):
    #   - derive: your formula equals the simulator's closed form of the ring
    #     (simulator/collectives/all_reduce.py) on random p, n, α, β, γ (relative 1e-9),
    #     and a single rank costs 0;
    #   - measure: the grader calibrates α (a ping-pong, the lab's fit), β (the time per
    #     byte of one of the p messages in flight at once: the host's bus, measured by a
    #     concurrent exchange, shared fairly) and γ (a float32 add) on your machine, and
    #     times the real ring at worlds 2 and 3, 1–16 MiB, in the same launch. Scoring rule:
    #     the median |predicted − measured| / measured of your prediction from that
    #     calibration may reach max(1.5 × e, e + 0.10), where e is the lab's own error in the
    #     same run — the larger median error of its simulated twin on the textbook cluster
    #     and of the ring's closed form, from the same calibration. The rule adapts to how
    #     noisy your machine is today; a failure prints every error.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 2.5: implement predict_ring_all_reduce_s in "
                              "exercises/ch02_predict_ring.py")
