"""Chapter 17, reference answer: the cross-device ops priced on one host thread (exercise in
``exercises/ch17_cross_device_cost.py``; the simulated twin is
:mod:`simulator.tf_distribute.mirrored`).

With ``c = n/R_copy`` and ``a = n/R_add``::

    ring          (k−1)(2c + a)
    one_device    2k·c + (k−1)·a
    hierarchical  (k−g)(2c + a) + [g > 1](g−1)(2c + a) = (k−1)(2c + a),  g = ⌈k/G⌉

On one thread every op does the same k−1 additions and the ring saves only the two copies of
the reducing device's own buffer: its advantage — every link busy at once — needs k links.
"""

from __future__ import annotations

OPS = ("ring", "one_device", "hierarchical")


def cross_device_op_s(op: str, nbytes: int, k: int, memcpy_Bps: float, reduce_Bps: float,
                      group_size: int = 2) -> float:
    """Copies over ``memcpy_Bps`` plus additions over ``reduce_Bps``."""
    c, a = nbytes / memcpy_Bps, nbytes / reduce_Bps
    if op == "ring":
        return (k - 1) * (2 * c + a)
    if op == "one_device":
        return 2 * k * c + (k - 1) * a
    if op == "hierarchical":
        groups = -(-k // group_size)
        leaders_ring = (groups - 1) * (2 * c + a) if groups > 1 else 0.0
        return (k - groups) * (2 * c + a) + leaders_ring
    raise ValueError(f"unknown cross-device op {op!r}; choose one of {', '.join(OPS)}")


def fastest(nbytes: int, k: int, memcpy_Bps: float, reduce_Bps: float,
            group_size: int = 2) -> str:
    """The op of least :func:`cross_device_op_s`."""
    return min(OPS, key=lambda op: cross_device_op_s(op, nbytes, k, memcpy_Bps, reduce_Bps,
                                                     group_size))
