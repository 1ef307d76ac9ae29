"""Rank programs for grading chapter 20's exercises on the lab's real FSDP
(:mod:`backends.fsdp`): each returns plain numbers the tests compare with the answers."""

from __future__ import annotations

from typing import Any

from backends.fsdp.measure import gather_log, time_step
from lab.models import mlp


def peaks(widths: tuple[int, ...], configs: list[tuple[bool, bool]]) -> dict[Any, int]:
    """This rank's peak bytes over one fp32 Adam step of :func:`lab.models.mlp` of ``widths``
    on one row, per ``(reshard_after_forward, prefetch)``."""
    features = (widths[0], widths[-1])
    return {c: time_step(mlp(widths), features, 1, 1, *c, pytorch=False)["peak_bytes"]
            for c in configs}


def logs(widths: tuple[int, ...], configs: list[tuple[bool, bool]]
         ) -> dict[Any, list[tuple[str, int]]]:
    """This rank's log of all-gathers issued and unit computes begun over one step, per
    ``(reshard_after_forward, prefetch)``."""
    features = (widths[0], widths[-1])
    return {c: gather_log(mlp(widths), features, *c) for c in configs}
