"""Twins of book chapters 1–2's opening: ping-pong, a stream one way and the naive one-to-all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lab.twins import KiB, MiB, Twin, register, spmd
from simulator.collectives import point_to_point as sim_p2p


def _ping_pong_step(nbytes: int, tracer: Any = None) -> Callable[[], None]:
    import torch

    from backends.collectives.point_to_point import ping_pong

    buf = torch.zeros(nbytes, dtype=torch.uint8)
    return lambda: ping_pong(buf, tracer)


def _ping_pong_check(nbytes: int) -> None:
    import torch
    import torch.distributed as dist

    from backends.collectives.point_to_point import ping_pong

    rank = dist.get_rank()
    buf = torch.arange(nbytes, dtype=torch.uint8) if rank == 0 else torch.zeros(
        nbytes, dtype=torch.uint8)
    ping_pong(buf)
    if rank in (0, 1) and not torch.equal(buf, torch.arange(nbytes, dtype=torch.uint8)):
        raise AssertionError(f"rank {rank}: ping-pong returned different bytes")


def _stream_step(nbytes: int, tracer: Any = None) -> Callable[[], None]:
    import torch

    from backends.collectives.point_to_point import stream

    buf = torch.zeros(nbytes, dtype=torch.uint8)
    return lambda: stream(buf, tracer)


def _stream_check(nbytes: int) -> None:
    import torch
    import torch.distributed as dist

    from backends.collectives.point_to_point import stream

    rank = dist.get_rank()
    sent = torch.arange(nbytes, dtype=torch.uint8)
    buf = sent.clone() if rank == 0 else torch.zeros(nbytes, dtype=torch.uint8)
    stream(buf)
    if rank == 1 and not torch.equal(buf, sent):
        raise AssertionError("rank 1: the stream delivered different bytes")


def _one_to_all_step(nbytes: int, tracer: Any = None) -> Callable[[], None]:
    import torch

    from backends.collectives.point_to_point import one_to_all

    buf = torch.zeros(nbytes, dtype=torch.uint8)
    return lambda: one_to_all(buf, 0, tracer)


def _one_to_all_check(nbytes: int) -> None:
    import torch
    import torch.distributed as dist

    from backends.collectives.point_to_point import one_to_all

    elems = max(nbytes // 4, 1)
    ours = torch.randn(elems, generator=torch.Generator().manual_seed(dist.get_rank()))
    builtin = ours.clone()
    one_to_all(ours, root=0)
    dist.broadcast(builtin, src=0)
    if not torch.equal(ours, builtin):
        raise AssertionError(f"rank {dist.get_rank()}: one_to_all differs from dist.broadcast")


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
    sim_p2p.ping_pong, _ping_pong_step, _ping_pong_check, sim_p2p.ping_pong_cost)

STREAM = _between_two(
    "stream", "rank 0 sends n bytes to rank 1, one way, call after call: α + nβ a message",
    sim_p2p.stream, _stream_step, _stream_check, sim_p2p.stream_cost)

ONE_TO_ALL = register(Twin(
    name="one_to_all", chapter="1-2",
    summary="the root sends n bytes to each other rank in turn: (p − 1)(α + nβ)",
    simulate=spmd(sim_p2p.one_to_all), real_step=_one_to_all_step, check=_one_to_all_check,
    closed_form=lambda p, n, a, b, g: sim_p2p.one_to_all_cost(p, n, a, b),
    worlds=(2, 3, 4), sizes=tuple(2**k for k in range(16, 27, 2)),
    quick_worlds=(2, 3), quick_sizes=(64 * KiB, 1 * MiB, 16 * MiB), min_world=2))
