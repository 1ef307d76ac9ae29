"""Chapter 1 exercise: fit the α-β model to measured message times.

The α-β model (Hockney 1994; textbook chapter 1, "The α-β cost model") prices one message of
``n`` bytes at ``T(n) = α + n·β``: α the latency in seconds, β the time per byte in seconds per
byte (β = 1/B for a bandwidth B in bytes/s). ``lab.calibrate`` measures one-way times with a
ping-pong sweep and fits α and β to them; here you write that fit yourself.

Grade your answer::

    make grade CH=01

and read ``solutions/ch01_alpha_beta.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def fit_alpha_beta(sizes_bytes: Sequence[float], times_s: Sequence[float]) -> tuple[float, float]:
    """Fit ``t = α + n·β`` to one-way message times, minimising the *relative* error.

    Args:
        sizes_bytes: message sizes ``n_i``, bytes (at least two different sizes).
        times_s: the measured one-way time ``t_i`` of each size, s (all positive).

    Returns:
        ``(alpha_s, beta_s_per_byte)``: the latency α ≥ 0, s, and the time per byte β, s/B.
    """
    # ===== EXERCISE 1.1: fit α and β by relative least squares =============================
    #
    # Points: 8 (in proportion to the tests of ex01_1 that pass; `make grade EX=1.1`)
    #
    # Choose α ≥ 0 and β to minimise the sum of squared *relative* errors
    #
    #     Σ_i ((α + n_i·β − t_i) / t_i)²                    (textbook eq. eq-rel-fit)
    #
    # Why relative: the sizes span 1 KiB … 64 MiB, so with absolute errors the largest
    # messages dominate and the fit ignores the small ones, which are the only ones that carry
    # information about α (it can even come out negative).
    #
    # Hints:
    #   1. Divide each equation α + n_i·β = t_i by t_i:  α·(1/t_i) + β·(n_i/t_i) = 1.
    #      That is still *linear* in (α, β): a design matrix with rows (1/t_i, n_i/t_i)
    #      and a target vector of ones. numpy.linalg.lstsq solves it in one call (or write
    #      out the 2×2 normal equations).
    #   2. If the α you get is negative, a latency below zero means nothing physically: set
    #      α = 0 and find the best β alone, minimising Σ_i (β·n_i/t_i − 1)² (one unknown,
    #      set the derivative to zero).
    #   3. Return plain Python floats.
    #
    # What is graded (tests/exercises/test_ch01_alpha_beta.py, `make grade CH=01`):
    #   - noiseless times from many (α, β) give back exactly that α and β;
    #   - times with a few percent of multiplicative noise give β within a few percent and α
    #     close to the truth;
    #   - your answer equals lab.calibrate.fit_alpha_beta's on the same data (relative 1e-6),
    #     and α is never negative;
    #   - sim vs real: a ping-pong sweep measured on this machine, fitted with your function,
    #     makes the simulator predict the measured round trips within 25 % (median).
    # =======================================================================================
    raise NotImplementedError("EXERCISE 1.1: implement fit_alpha_beta in "
                              "exercises/ch01_alpha_beta.py")
