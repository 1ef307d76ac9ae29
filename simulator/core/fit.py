"""The α-β fit: ``t(n) = α + n·β`` through measured (size, time) points.

The one fit the calibration (:mod:`lab.calibrate`) and the simulator's reading of a calibration
use, so that both sides agree on what α and β a set of ping-pong times means.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fit:
    """``t(n) = α + n·β`` fitted to measurements."""

    alpha_s: float
    beta_s_per_B: float
    rel_residuals: tuple[float, ...]

    @property
    def bandwidth_Bps(self) -> float:
        """1/β, bytes/s."""
        return 1.0 / self.beta_s_per_B


def fit_alpha_beta(sizes: Sequence[float], times_s: Sequence[float]) -> Fit:
    """Least-squares fit of ``t = α + n·β`` minimising the sum of squared *relative* errors.

    Dividing each equation ``α + n_i·β = t_i`` by ``t_i`` gives the linear system
    ``α/t_i + β·n_i/t_i = 1``, solved by ordinary least squares. α is kept ≥ 0 (refitting β
    alone if the unconstrained α comes out negative).
    """
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if n.shape != t.shape or n.size < 2:
        raise ValueError("need at least two (size, time) points of equal count")
    if np.any(t <= 0):
        raise ValueError("times must be positive")
    a = np.stack([1 / t, n / t], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if alpha < 0:
        alpha = 0.0
        beta = float(np.sum(n / t) / np.sum((n / t) ** 2))
    if beta <= 0:
        raise ValueError("the fitted bandwidth is not positive: are the times increasing?")
    residuals = tuple(float(x) for x in (alpha + n * beta - t) / t)
    return Fit(float(alpha), float(beta), residuals)
