"""The collectives tensor parallelism needs, on a group or on a profiling stand-in.

Each helper does nothing with one rank, calls ``torch.distributed`` on a real group, and on a
:class:`ProfileGroup` (one process standing in for the group) makes a local tensor of the right
shape and logs the collective, so a rank's compute can be timed without its peers
(:mod:`lab.tensor_parallel`); on a :class:`TracedGroup` it runs on the group inside a span of a
:class:`~backends.trace.Tracer` (a step's timeline). The reduce-scatter is the lab's ring
(:mod:`backends.collectives.reduce_scatter`).

Units: sizes in elements; logged sizes in bytes, times in seconds (``time.perf_counter``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
import torch.distributed as dist

from backends.collectives.reduce_scatter import ring_reduce_scatter
from backends.tensor_parallel.groups import Group
from backends.trace import Tracer


class ProfileGroup:
    """A stand-in for a group of ``size`` ranks inside ONE process, to profile a rank's
    compute: sizes and ranks are the real group's, every collective is replaced by a local
    copy of the right shape (numbers are not meaningful) and logged in :attr:`log` as
    ``(kind, group, bytes, entered_s, left_s)`` (``time.perf_counter``), so the compute
    between collectives can be timed (:func:`lab.tensor_parallel.profile_ops`).

    ``wait``: called first in every stand-in collective (inside the logged span), e.g. one
    blocking exchange of a tiny message with another profiling process — so that the
    compute after each collective is timed as it runs in a real step, right after the
    thread slept in a blocking wait (``lab.tensor_parallel.wait_step``)."""

    def __init__(self, size: int, rank: int, name: str, log: list[tuple[Any, ...]],
                 wait: Callable[[], None] | None = None) -> None:
        self.size, self.rank, self.name, self.log = size, rank, name, log
        self.wait = wait

    def enter(self) -> float:
        """Start of a stand-in collective: its entry time (s, ``perf_counter``), then the
        wait if there is one."""
        now = time.perf_counter()
        if self.wait is not None:
            self.wait()
        return now


class TracedGroup:
    """A real group whose every collective is a span of ``tracer`` (kind ``allreduce``,
    ``allgather`` or ``reducescatter``, named ``KIND NAME``, bytes moved in): hand it to a
    model instead of the group to record a step's timeline. Untraced code passes the group
    itself, so tracing costs nothing when off."""

    def __init__(self, group: Group, tracer: Tracer, name: str = "tensor") -> None:
        self.group, self.tracer, self.name = group, tracer, name


def _traced(group: Group, kind: str, nbytes: int) -> tuple[Group, AbstractContextManager[None]]:
    """The group to call ``torch.distributed`` on, and the span to call it in."""
    if isinstance(group, TracedGroup):
        return group.group, group.tracer.span(kind, f"{kind} {group.name}", nbytes)
    return group, nullcontext()


def _size(group: Group) -> int:
    if isinstance(group, ProfileGroup):
        return group.size
    if isinstance(group, TracedGroup):
        return _size(group.group)
    return int(dist.get_world_size(group))


def _rank(group: Group) -> int:
    if isinstance(group, ProfileGroup):
        return group.rank
    if isinstance(group, TracedGroup):
        return _rank(group.group)
    return int(dist.get_rank(group))


def _all_reduce_(x: torch.Tensor, group: Group, op: Any = None) -> None:
    """In-place all-reduce (SUM unless ``op``) over ``group``; nothing with one rank."""
    if _size(group) == 1:
        return
    if isinstance(group, ProfileGroup):
        start = group.enter()
        group.log.append(("all_reduce", group.name, x.numel() * x.element_size(), start,
                          time.perf_counter()))
        return
    group, traced = _traced(group, "allreduce", x.numel() * x.element_size())
    with traced:
        dist.all_reduce(x, op=op or dist.ReduceOp.SUM, group=group)


def _all_reduce(x: torch.Tensor, group: Group) -> torch.Tensor:
    if _size(group) == 1:
        return x
    x = x.contiguous().clone()
    _all_reduce_(x, group)
    return x


def _all_gather(x: torch.Tensor, dim: int, group: Group) -> torch.Tensor:
    """Concatenate every rank's ``x`` along ``dim``, in group-rank order."""
    t = _size(group)
    if t == 1:
        return x
    if isinstance(group, ProfileGroup):
        start = group.enter()
        out = torch.cat([x] * t, dim=dim)
        group.log.append(("all_gather", group.name, out.numel() * out.element_size(), start,
                          time.perf_counter()))
        return out
    parts = [torch.empty_like(x) for _ in range(t)]
    group, traced = _traced(group, "allgather", t * x.numel() * x.element_size())
    with traced:
        dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


def _split(x: torch.Tensor, dim: int, group: Group) -> torch.Tensor:
    """This rank's ``1/t`` slice of ``x`` along ``dim``."""
    t = _size(group)
    if t == 1:
        return x
    if x.shape[dim] % t:
        raise ValueError(f"dimension {dim} of size {x.shape[dim]} does not split over {t} ranks")
    return x.chunk(t, dim=dim)[_rank(group)].contiguous()


def _reduce_scatter(x: torch.Tensor, group: Group) -> torch.Tensor:
    """Sum over the group, keep this rank's ``1/t`` along dim 0 (the lab's ring reduce-scatter,
    :mod:`backends.collectives.reduce_scatter`)."""
    t = _size(group)
    if t == 1:
        return x
    if x.shape[0] % t:
        raise ValueError(f"sequence length {x.shape[0]} does not split over {t} ranks")
    x = x.contiguous()
    out = x.new_empty((x.shape[0] // t, *x.shape[1:]))
    if isinstance(group, ProfileGroup):
        start = group.enter()
        out.copy_(x[: out.shape[0]])
        group.log.append(("reduce_scatter", group.name, x.numel() * x.element_size(), start,
                          time.perf_counter()))
        return out
    group, traced = _traced(group, "reducescatter", x.numel() * x.element_size())
    with traced:
        ring_reduce_scatter(out.view(-1), x.view(-1), group=group)
    return out
