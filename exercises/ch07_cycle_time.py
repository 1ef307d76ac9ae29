"""Chapter 7 exercise: predict the best cycle time for a model on a network.

Horovod's background thread wakes up at most every ``c`` seconds (``HOROVOD_CYCLE_TIME``),
negotiates which gradients every rank has ready (``c₀`` per cycle), and all-reduces them fused.
A short cycle pays ``c₀`` often and fuses little, so each all-reduce pays the latency ``a``; a
long one leaves the last gradients waiting up to a cycle after backward ends. Under load the
loop is clocked by its own work, and its cycle settles at ``L`` of {eq}`eq-horovod-cycle`
(textbook chapter 7, "The cycle on a timeline")::

    L = (a + c₀) / (1 − N·β'/T_b),     x = N·L/T_b = (a + c₀) / (T_b/N − β')

with a ring all-reduce of ``n`` bytes costing ``a + n·β'``, ``a = 2(p−1)α``, ``β' = 2(p−1)/p·β``.

Grade your answer::

    make grade CH=07

and read ``solutions/ch07_cycle_time.py`` afterwards. Then look at the cycle-time sweep,
predicted and measured, in ``notebooks/07_horovod.ipynb``.
"""

from __future__ import annotations

from collections.abc import Sequence


def self_clocked_cycle(nbytes: float, backward_s: float, world: int, alpha_s: float,
                       beta_s_per_B: float, negotiation_s: float = 0.0
                       ) -> tuple[float, float] | None:
    """``(L, x)`` of {eq}`eq-horovod-cycle`: the busy cycle's length, s, and the bytes it fuses;
    ``None`` when backward produces bytes faster than the ring carries them (``T_b/N ≤ β'``).

    Args:
        nbytes: gradient bytes ``N`` of one backward pass.
        backward_s: backward time ``T_b``, s (gradients arrive at a steady rate).
        world: ranks ``p``.
        alpha_s, beta_s_per_B: the link's α (s) and β (s per byte).
        negotiation_s: ``c₀``, s per cycle.
    """
    # ===== EXERCISE 7.2a: the self-clocked cycle =============================================
    #
    # Points: 6 (in proportion to the tests of ex07_2 that pass; `make grade EX=7.2`)
    #
    #   a = 2(p−1)·α,  β' = 2(p−1)/p·β
    #   no fixed point if T_b/N − β' ≤ 0 (return None)
    #   x = (a + c₀) / (T_b/N − β'),  L = x·T_b/N
    #
    # Graded: the chapter's ResNet-50 example (L = 1.80 ms, x = 0.92 MB) and random inputs
    # against simulator.horovod.cycle_fixed_point.
    # =========================================================================================
    raise NotImplementedError("EXERCISE 7.2a: implement self_clocked_cycle in "
                              "exercises/ch07_cycle_time.py")


def predict_best_cycle_time(backward_s: Sequence[float], param_bytes: Sequence[int],
                            cycle_times_s: Sequence[float], world: int, alpha_s: float,
                            beta_s_per_B: float, negotiation_s: float,
                            threshold_bytes: int) -> float:
    """The cycle time among ``cycle_times_s`` with the shortest backward-plus-communication.

    Args:
        backward_s: backward time of each layer, s, in forward order (backward runs the last
            layer first).
        param_bytes: gradient bytes of each layer, same order (one float32 tensor per layer).
        cycle_times_s: candidate cycle times, s (all > 0).
        world: ranks ``p`` ≥ 2.
        alpha_s, beta_s_per_B: the link's α (s) and β (s per byte).
        negotiation_s: ``c₀``, the cost of one negotiation, s (every cycle pays it).
        threshold_bytes: the fusion threshold, bytes.

    Returns:
        The best cycle time (the first of equals).
    """
    # ===== EXERCISE 7.2b: the best cycle time ================================================
    #
    # Step the background thread cycle by cycle, for each candidate c:
    #   1. layer i's gradient is ready at sum(backward_s[i:]); the tensors become ready in
    #      reverse layer order (that is the agreed order).
    #   2. t = 0. Each cycle: start = t; take every tensor not yet taken that is ready at
    #      ≤ start; t = start + c₀ (negotiation, paid even if nothing is ready); group the
    #      taken tensors in order, each group as large as fits under the threshold (one dtype:
    #      your fuse_responses of exercise 7.1 does exactly this; a tensor over the threshold
    #      goes alone); each group's all-reduce: t += a + n·β'. Then the next cycle starts at
    #      max(start + c, t) — a cycle whose work took longer than c is followed at once.
    #   3. the time is max(end of the last all-reduce, end of backward).
    # Keep the c with the smallest time. Before you code: where do you expect the best c to be
    # compared with L of self_clocked_cycle?
    #
    # What is graded (tests/exercises/test_ch07_cycle_time.py, `make grade CH=07`):
    #   - on random models and networks, the simulator (simulator.horovod.predict_step: two
    #     threads per rank, negotiation, fused all-reduces on a contention-free network) finds
    #     your c within 1 % of its best c's step time; a miss is explained in words;
    #   - a free negotiation on a fast network wants the shortest cycle; an expensive one does
    #     not.
    # The measurement (notebook 07) is not graded: on a 2-core machine nearby cycle times
    # measure within each other's p10–p90 bands.
    # =========================================================================================
    raise NotImplementedError("EXERCISE 7.2b: implement predict_best_cycle_time in "
                              "exercises/ch07_cycle_time.py")
