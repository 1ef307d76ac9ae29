"""Chapter 20 exercise, reference answer: the bytes one FSDP rank sends per step.

See ``exercises/ch20_fsdp_traffic.py`` for the task.
"""

from __future__ import annotations


def traffic_bytes(unit_numels: list[int], world: int, reshard_after_forward: bool = True,
                  param_itemsize: int = 4, reduce_itemsize: int = 4) -> float:
    """Bytes one rank sends in one step: per unit one or two all-gathers and one
    reduce-scatter of its padded buffer, ``(N−1)/N`` of each."""
    if world < 1 or min(unit_numels, default=0) < 1 or param_itemsize < 1 or reduce_itemsize < 1:
        raise ValueError("need world ≥ 1, units of ≥ 1 parameter and positive item sizes")
    gathers = 2 if reshard_after_forward else 1
    padded = sum(-(-n // world) * world for n in unit_numels)
    return (world - 1) / world * padded * (gathers * param_itemsize + reduce_itemsize)
