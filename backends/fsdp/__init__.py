"""Fully Sharded Data Parallel (chapter 20), from scratch: :class:`FSDP` over units
(:mod:`backends.fsdp.unit`), its rank programs for measurement (:mod:`backends.fsdp.measure`).
Twin of :mod:`simulator.fsdp`."""

from backends.fsdp.fsdp import FSDP
from backends.fsdp.unit import FlatUnit, MixedPrecision

__all__ = ["FSDP", "FlatUnit", "MixedPrecision"]
