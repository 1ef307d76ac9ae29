"""Chapter 11, reference answer: the cost of a stage boundary (exercise in
``exercises/ch11_boundary.py``; the planner's is
:func:`simulator.pipeline.planner.boundary_time`)."""

from __future__ import annotations


def boundary_time(output_bytes: int, bandwidth_Bps: float, latency_s: float = 0.0,
                  full_duplex: bool = False) -> float:
    """Two messages of ``output_bytes``, one after the other, or at once on a full-duplex link."""
    one_message = latency_s + output_bytes / bandwidth_Bps
    return one_message if full_duplex else 2 * one_message
