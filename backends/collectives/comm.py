"""Comm: one rank's view of a team of real ranks — the real twin of ``SimComm``'s messaging.

Every chapter-2 algorithm is written per rank against this small class, so that it reads like
its simulated twin line by line::

    real (backends/collectives)                 simulated (simulator/collectives)
    comm.send(dst, tensor[lo:hi])               yield from comm.send(dst, nbytes)
    work = comm.isend(dst, chunk); work.wait()  work = comm.isend(dst, nbytes); yield work.wait()
    comm.reduce(acc, incoming, op)              yield from comm.reduce(nbytes)

Peers are named by their rank *in the team* (``comm.rank``, ``comm.world_size``), as in
``torch.distributed`` groups. A team is a process group, the default group (``None``), or a
plain list of global ranks: a sub-team for hierarchical algorithms that needs no
``dist.new_group`` (which every rank would have to call). Messages use only
``dist.send/recv/isend/irecv``; each one is recorded as a ``send``/``recv`` span and each local
combination as a ``reduce`` span when a :class:`~backends.trace.Tracer` is given. Span names use
global ranks (``send 2->3``), the ranks a trace is drawn by.

Gloo's sends are *rendezvous* sends: the bytes move only once the receiver has posted its
receive, so a blocking ``send`` of a large message waits for the receiver. The simulator's
sends are eager. Wherever a rank sends and receives in one step, the algorithms therefore post
both (``isend``/``irecv``, :meth:`Comm.sendrecv`) before waiting on either, which cannot
deadlock; the rings also post the receive of their next step before waiting on the current
one, so that a neighbour's send never waits for our "ready to receive" notice (gloo's own ring
does the same), and every step posts its receive before its send (on a pair's one connection a
notice posted after a send queues behind the send's bytes). None of this changes which message
goes where in which step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from backends.trace import Tracer, span

Group = dist.ProcessGroup | Sequence[int] | None
"""Who takes part: a process group, a list of global ranks, or ``None`` for every rank."""

ReduceOp = Any
"""A ``dist.ReduceOp`` member: SUM, AVG, MAX or MIN."""

_SUPPORTED = ("SUM", "AVG", "MAX", "MIN")


class Work:
    """A pending ``isend``/``irecv``; :meth:`wait` completes it and records its span."""

    def __init__(self, work: Any, tracer: Tracer | None, kind: str, name: str, nbytes: int,
                 start: float) -> None:
        self._work, self._tracer = work, tracer
        self._what = (kind, name, nbytes)
        self._start = start  # when it was posted, s (time.perf_counter)

    def wait(self) -> None:
        """Block until the message has been handed over (sent) or has arrived (received)."""
        if self._work is not None:
            self._work.wait()
        if self._tracer is not None and self._tracer.enabled:
            kind, name, nbytes = self._what
            self._tracer.trace.record(self._tracer.rank, kind, name, self._start,
                                      time.perf_counter(), nbytes)


class Comm:
    """This rank in a team: ``rank`` and ``world_size`` are relative to the team."""

    def __init__(self, group: Group = None, tracer: Tracer | None = None) -> None:
        self.pg: dist.ProcessGroup | None = None
        if group is None:
            self.ranks = list(range(dist.get_world_size()))
        elif isinstance(group, dist.ProcessGroup):
            self.pg, self.ranks = group, dist.get_process_group_ranks(group)
        else:
            self.ranks = list(group)
        if dist.get_rank() not in self.ranks:
            raise ValueError(f"rank {dist.get_rank()} is not in the team {self.ranks}")
        self.rank = self.ranks.index(dist.get_rank())
        self.world_size = len(self.ranks)
        self.tracer = tracer

    def team_rank(self, global_rank: int) -> int:
        """Position in the team of a global rank (roots are given as global ranks)."""
        if global_rank not in self.ranks:
            raise ValueError(f"rank {global_rank} is not in the team {self.ranks}")
        return self.ranks.index(global_rank)

    def _name(self, src: int, dst: int) -> str:
        return f"{self.ranks[src]}->{self.ranks[dst]}"

    # -- messages ------------------------------------------------------------------------

    def send(self, dst: int, tensor: torch.Tensor, tag: int = 0) -> None:
        """Blocking send of ``tensor`` to team rank ``dst``."""
        with span(self.tracer, "send", f"send {self._name(self.rank, dst)}", tensor.nbytes):
            dist.send(tensor, self.ranks[dst], self.pg, tag)

    def recv(self, src: int, tensor: torch.Tensor, tag: int = 0) -> None:
        """Blocking receive from team rank ``src`` into ``tensor``."""
        with span(self.tracer, "recv", f"recv {self._name(src, self.rank)}", tensor.nbytes):
            dist.recv(tensor, self.ranks[src], self.pg, tag)

    def isend(self, dst: int, tensor: torch.Tensor, tag: int = 0) -> Work:
        """Start sending ``tensor`` to ``dst``; do not touch ``tensor`` before ``wait()``."""
        start = time.perf_counter()
        return Work(dist.isend(tensor, self.ranks[dst], self.pg, tag), self.tracer, "send",
                    f"send {self._name(self.rank, dst)}", tensor.nbytes, start)

    def irecv(self, src: int, tensor: torch.Tensor, tag: int = 0) -> Work:
        """Post a receive from ``src`` into ``tensor``; it is filled once ``wait()`` returns."""
        start = time.perf_counter()
        return Work(dist.irecv(tensor, self.ranks[src], self.pg, tag), self.tracer, "recv",
                    f"recv {self._name(src, self.rank)}", tensor.nbytes, start)

    def sendrecv(self, dst: int, send: torch.Tensor, src: int, recv: torch.Tensor,
                 tag: int = 0) -> None:
        """Send ``send`` to ``dst`` while receiving ``recv`` from ``src`` (one step).

        The receive is posted first: gloo keeps one TCP connection per pair, so when ``src``
        is ``dst`` a "ready to receive" notice posted after our send would queue behind its
        bytes, and the partner's message would wait for ours to cross (the two directions
        taking turns instead of overlapping, depending on which rank came first).
        """
        incoming = self.irecv(src, recv, tag)
        outgoing = self.isend(dst, send, tag)
        incoming.wait()
        outgoing.wait()

    # -- local work ----------------------------------------------------------------------

    def reduce(self, acc: torch.Tensor, incoming: torch.Tensor, op: ReduceOp) -> None:
        """``acc ⊕= incoming`` in place (AVG adds; :func:`finish` divides at the end)."""
        with span(self.tracer, "reduce", "reduce", incoming.nbytes):
            if op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
                acc.add_(incoming)
            elif op == dist.ReduceOp.MAX:
                torch.maximum(acc, incoming, out=acc)
            else:
                torch.minimum(acc, incoming, out=acc)


def check_op(op: ReduceOp, tensor: torch.Tensor) -> None:
    """Refuse, on every rank alike and before any message, what :meth:`Comm.reduce` can't do."""
    if not any(op == getattr(dist.ReduceOp, name) for name in _SUPPORTED):
        raise ValueError(f"unsupported reduction {op}; use one of {', '.join(_SUPPORTED)}")
    if op == dist.ReduceOp.AVG and not tensor.is_floating_point():
        raise ValueError(f"AVG needs a floating-point tensor, got {tensor.dtype}")


def finish(tensor: torch.Tensor, op: ReduceOp, world_size: int) -> None:
    """AVG is SUM followed by a division by the world size (gloo has no AVG)."""
    if op == dist.ReduceOp.AVG:
        tensor.div_(world_size)


_SCRATCH: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}


def scratch(like: torch.Tensor, numel: int) -> torch.Tensor:
    """A receive buffer of ``numel`` elements, kept from call to call (one per dtype/device).

    Fresh memory is expensive: the first touch of every page faults and a large free returns
    the pages to the kernel, which together cost more than sending the bytes over loopback
    TCP (32 MiB: ~10 ms of page faults, ~2 ms to free, ~13 ms to exchange). Like NCCL's and
    gloo's preallocated buffers, this one is allocated once, grows when needed, and is reused.
    One user at a time: take it for a single receive-then-reduce buffer only.
    """
    key = (like.device, like.dtype)
    buf = _SCRATCH.get(key)
    if buf is None or buf.numel() < numel:
        buf = _SCRATCH[key] = like.new_empty(numel)
    return buf[:numel]


def chunk_run(buf: torch.Tensor, bounds: list[tuple[int, int]], first: int,
              stop: int) -> torch.Tensor:
    """The contiguous run of chunks ``first … stop−1`` of ``buf`` (``stop`` clipped to the
    number of chunks); ``bounds`` are the chunks' (start, stop) element offsets."""
    return buf[bounds[first][0]:bounds[min(stop, len(bounds)) - 1][1]]


def check_flat(*tensors: torch.Tensor) -> None:
    """Every algorithm works on flat, contiguous buffers."""
    for t in tensors:
        if t.dim() != 1 or not t.is_contiguous():
            raise ValueError(f"expected a flat contiguous tensor, got shape {tuple(t.shape)}")
