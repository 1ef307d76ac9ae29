"""Twins of book chapters 1–2's opening: ping-pong, a stream one way and the naive one-to-all.

What each rank runs to check and time them is :mod:`backends.collectives.twin_ranks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from backends.collectives import twin_ranks
from lab.twins import KiB, MiB, Twin, register, spmd
from simulator.collectives import point_to_point as sim_p2p


def _between_two(name: str, summary: str, simulate: Any, real_step: Any, check: Any,
                 cost: Callable[[float, float, float], float]) -> Twin:
    """A twin of ranks 0 and 1 alone (the others idle), swept over 64 KiB … 64 MiB."""
    return register(Twin(
        name=name, chapter="1-2", summary=summary, simulate=spmd(simulate),
        real_step=real_step, check=check, closed_form=lambda p, n, a, b, g: cost(n, a, b),
        worlds=(2,), sizes=tuple(2**k for k in range(16, 27)),
        quick_worlds=(2,), quick_sizes=(64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB), min_world=2))


PING_PONG = _between_two(
    "ping_pong", "rank 0 sends n bytes to rank 1 and gets them back: 2(α + nβ)",
    sim_p2p.ping_pong, twin_ranks.ping_pong_step, twin_ranks.ping_pong_check,
    sim_p2p.ping_pong_cost)

STREAM = _between_two(
    "stream", "rank 0 sends n bytes to rank 1, one way, call after call: α + nβ a message",
    sim_p2p.stream, twin_ranks.stream_step, twin_ranks.stream_check, sim_p2p.stream_cost)

ONE_TO_ALL = register(Twin(
    name="one_to_all", chapter="1-2",
    summary="the root sends n bytes to each other rank in turn: (p − 1)(α + nβ)",
    simulate=spmd(sim_p2p.one_to_all), real_step=twin_ranks.one_to_all_step,
    check=twin_ranks.one_to_all_check,
    closed_form=lambda p, n, a, b, g: sim_p2p.one_to_all_cost(p, n, a, b),
    worlds=(2, 3, 4), sizes=tuple(2**k for k in range(16, 27, 2)),
    quick_worlds=(2, 3), quick_sizes=(64 * KiB, 1 * MiB, 16 * MiB), min_world=2))
