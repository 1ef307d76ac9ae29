"""Chapter 1, reference answer: fit the α-β model to measured message times.

The exercise is in ``exercises/ch01_alpha_beta.py``; the same fit runs inside
``lab.calibrate`` on every calibration.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def fit_alpha_beta(sizes_bytes: Sequence[float], times_s: Sequence[float]) -> tuple[float, float]:
    """Fit ``t = α + n·β`` to one-way message times, minimising the *relative* error.

    Minimises ``Σ_i ((α + n_i·β − t_i) / t_i)²`` over α ≥ 0 and β (textbook chapter 1,
    "Calibrating α and β on your machine").

    Args:
        sizes_bytes: message sizes ``n_i``, bytes (at least two different sizes).
        times_s: the measured one-way time ``t_i`` of each size, s (all positive).

    Returns:
        ``(alpha_s, beta_s_per_byte)``: the latency α ≥ 0, s, and the time per byte β, s/B.
    """
    n = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if n.shape != t.shape or len(set(n.tolist())) < 2:
        raise ValueError("need one time per size and at least two different sizes")
    if np.any(t <= 0):
        raise ValueError("times must be positive")

    # Divide each equation α + n_i·β = t_i by t_i. The relative error of point i becomes the
    # residual of  α·(1/t_i) + β·(n_i/t_i) = 1,  which is linear in (α, β): ordinary least
    # squares on a two-column design matrix with a target of ones.
    design = np.column_stack([1 / t, n / t])
    (alpha, beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)

    # A negative latency is meaningless: the best fit with α ≥ 0 then has α = 0 (the error is
    # a convex bowl, so the constrained minimum lies on the boundary). With α = 0 the error is
    # Σ_i (β·y_i − 1)² for y_i = n_i/t_i; its derivative vanishes at β = Σ y_i / Σ y_i².
    if alpha < 0:
        y = n / t
        alpha, beta = 0.0, float(np.sum(y) / np.sum(y * y))
    return float(alpha), float(beta)
