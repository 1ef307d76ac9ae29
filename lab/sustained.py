"""The collectives' sustained timing: each operation run back to back for a fixed time per
repeat, as the collectives' accuracy sweep times both twins, with the primitives the prediction
rests on re-timed in the same rounds.

The rank code is :mod:`backends.sustained`; here its rank function is bound to the twin
registry (:func:`measure_sustained`), so that :mod:`lab.compare` launches it by the twins'
names. Times are seconds, sizes bytes.
"""

from __future__ import annotations

import functools

from backends import sustained
from backends.sustained import CALLS_PROBES as CALLS_PROBES  # re-exported for the benchmarks
from backends.sustained import sustained_calls as sustained_calls
from lab.twins import get_twin

measure_sustained = functools.partial(sustained.measure_sustained, get_twin)
"""Rank function: :func:`backends.sustained.measure_sustained` finding the twins in the
registry — ``measure_sustained(points, repeats, repeat_s, chain, …)``, each ``(twin name,
nbytes)`` point timed back to back, seconds per call."""
