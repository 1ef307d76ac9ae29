"""Comm: one rank's view of a team of real ranks — the real twin of ``SimComm``'s messaging.

Every chapter-2 algorithm is written per rank against this small class, so that it reads like
its simulated twin line by line::

    real (backends/collectives)                 simulated (simulator/collectives)
    comm.send(dst, tensor[lo:hi])               yield from comm.send(dst, nbytes)
    work = comm.isend(dst, chunk); work.wait()  work = comm.isend(dst, nbytes); yield work.wait()
    comm.reduce(acc, incoming, op)              yield from comm.reduce(nbytes)

Messages are posted on the process group itself, found once when the ``Comm`` is made (as
:func:`post_send` and :func:`post_recv` post a lone message), not through ``dist.isend``, and
an untraced run gets the group's own work objects: a ring posts
twice a step, and on a host with more ranks than cores (four on two) every microsecond of a
rank's Python is paid again by the ranks waiting for a core (``dist.isend``'s argument
checks and a wrapper per message were a measurable part of a small all-reduce among four
ranks on two cores: ``benchmarks/call_overhead.py``). The calibration posts its chains and
exchanges the same way (:mod:`lab.calibrate`).

Peers are named by their rank *in the team* (``comm.rank``, ``comm.world_size``), as in
``torch.distributed`` groups. A team is a process group, the default group (``None``), or a
plain list of global ranks: a sub-team for hierarchical algorithms that needs no
``dist.new_group`` (which every rank would have to call). Messages use only
point-to-point sends and receives; each one is recorded as a ``send``/``recv`` span and each local
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
from typing import Any, Protocol

import torch
import torch.distributed as dist

from backends.trace import Tracer, span
from simulator.collectives.chunks import chunk_bounds

Group = dist.ProcessGroup | Sequence[int] | None
"""Who takes part: a process group, a list of global ranks, or ``None`` for every rank."""

ReduceOp = Any
"""A ``dist.ReduceOp`` member: SUM, AVG, MAX or MIN."""

_SUPPORTED = ("SUM", "AVG", "MAX", "MIN")
_OPS = tuple(getattr(dist.ReduceOp, name) for name in _SUPPORTED)


class Pending(Protocol):
    """A posted ``isend``/``irecv``: :meth:`wait` blocks until it is complete."""

    def wait(self) -> Any: ...


class Work:
    """A pending ``isend``/``irecv`` of a traced run; :meth:`wait` completes it and records
    its span (untraced runs get the process group's own work object, which costs nothing
    more)."""

    def __init__(self, work: Any, tracer: Tracer, kind: str, name: str, nbytes: int,
                 start: float) -> None:
        self._work, self._tracer = work, tracer
        self._what = (kind, name, nbytes)
        self._start = start  # when it was posted, s (time.perf_counter)

    def wait(self) -> None:
        """Block until the message has been handed over (sent) or has arrived (received)."""
        self._work.wait()
        if self._tracer.enabled:
            kind, name, nbytes = self._what
            self._tracer.trace.record(self._tracer.rank, kind, name, self._start,
                                      time.perf_counter(), nbytes)


def post_send(tensor: torch.Tensor, dst: int, tag: int = 0,
              pg: dist.ProcessGroup | None = None) -> Any:
    """Post a send of ``tensor`` to rank ``dst`` *of* ``pg`` (default: every rank) on the
    process group itself, returning its work object.

    ``dist.isend`` does the same after a few microseconds of Python (finding the default
    group, translating ranks, checking arguments) that a ring pays twice a step; on a host
    with more ranks than cores that CPU is paid again by every rank waiting for a core. The
    collectives post the same way (:meth:`Comm.isend`, on the group their ``Comm`` found),
    and so does the calibration that prices their steps (:mod:`lab.calibrate`), so that what
    is measured is what the algorithms run.
    """
    return _on(pg).send([tensor], dst, tag)


def post_recv(tensor: torch.Tensor, src: int, tag: int = 0,
              pg: dist.ProcessGroup | None = None) -> Any:
    """Post a receive into ``tensor`` from rank ``src`` of ``pg`` (see :func:`post_send`)."""
    return _on(pg).recv([tensor], src, tag)


def _on(pg: dist.ProcessGroup | None) -> dist.ProcessGroup:
    group = pg or dist.group.WORLD
    if group is None:
        raise RuntimeError("no process group: call torch.distributed.init_process_group first")
    return group


class Comm:
    """This rank in a team: ``rank`` and ``world_size`` are relative to the team."""

    def __init__(self, group: Group = None, tracer: Tracer | None = None) -> None:
        self.pg: dist.ProcessGroup | None = None
        self.tracer = tracer
        if group is None:  # every rank: one look-up of the default group, not two
            world = self._group = _on(None)
            self.rank, self.world_size = world.rank(), world.size()
            self.ranks = self._peers = list(range(self.world_size))
            return
        me = dist.get_rank()
        if isinstance(group, dist.ProcessGroup):
            self.pg, self.ranks = group, dist.get_process_group_ranks(group)
        else:
            self.ranks = list(group)
        if me not in self.ranks:
            raise ValueError(f"rank {me} is not in the team {self.ranks}")
        self.rank = self.ranks.index(me)
        self.world_size = len(self.ranks)
        self._group = _on(self.pg)  # the process group its messages are posted on
        # a team rank as the process group it posts on names it: its rank in ``pg``, or the
        # global rank on the default group
        self._peers = list(range(self.world_size)) if self.pg is not None else self.ranks

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
        if self.tracer is None:  # untraced: no span, no name (a few µs a message in a rank)
            self._group.send([tensor], self._peers[dst], tag).wait()
            return
        with span(self.tracer, "send", f"send {self._name(self.rank, dst)}", tensor.nbytes):
            self._group.send([tensor], self._peers[dst], tag).wait()

    def recv(self, src: int, tensor: torch.Tensor, tag: int = 0) -> None:
        """Blocking receive from team rank ``src`` into ``tensor``."""
        if self.tracer is None:
            self._group.recv([tensor], self._peers[src], tag).wait()
            return
        with span(self.tracer, "recv", f"recv {self._name(src, self.rank)}", tensor.nbytes):
            self._group.recv([tensor], self._peers[src], tag).wait()

    def isend(self, dst: int, tensor: torch.Tensor, tag: int = 0) -> Pending:
        """Start sending ``tensor`` to ``dst``; do not touch ``tensor`` before ``wait()``."""
        if self.tracer is None:
            return self._group.send([tensor], self._peers[dst], tag)
        start = time.perf_counter()
        return Work(self._group.send([tensor], self._peers[dst], tag), self.tracer, "send",
                    f"send {self._name(self.rank, dst)}", tensor.nbytes, start)

    def irecv(self, src: int, tensor: torch.Tensor, tag: int = 0) -> Pending:
        """Post a receive from ``src`` into ``tensor``; it is filled once ``wait()`` returns."""
        if self.tracer is None:
            return self._group.recv([tensor], self._peers[src], tag)
        start = time.perf_counter()
        return Work(self._group.recv([tensor], self._peers[src], tag), self.tracer, "recv",
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
        if self.tracer is None:
            _combine(acc, incoming, op)
            return
        with span(self.tracer, "reduce", "reduce", incoming.nbytes):
            _combine(acc, incoming, op)


def _combine(acc: torch.Tensor, incoming: torch.Tensor, op: ReduceOp) -> None:
    """``acc ⊕= incoming`` (AVG adds)."""
    if op == dist.ReduceOp.SUM or op == dist.ReduceOp.AVG:
        acc.add_(incoming)
    elif op == dist.ReduceOp.MAX:
        torch.maximum(acc, incoming, out=acc)
    else:
        torch.minimum(acc, incoming, out=acc)


def check_op(op: ReduceOp, tensor: torch.Tensor) -> None:
    """Refuse, on every rank alike and before any message, what :meth:`Comm.reduce` can't do."""
    if op not in _OPS:
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
    return _scratch_base(like, numel)[:numel]


def _scratch_base(like: torch.Tensor, numel: int) -> torch.Tensor:
    """The whole kept buffer of :func:`scratch`, grown to ``numel`` elements if needed."""
    key = (like.device, like.dtype)
    buf = _SCRATCH.get(key)
    if buf is None or buf.numel() < numel:
        buf = _SCRATCH[key] = like.new_empty(numel)
        _ROWS.clear()  # rows of the old buffer must not keep it alive
    return buf


_ROWS: dict[tuple[torch.device, torch.dtype, int, int], list[torch.Tensor]] = {}
MAX_KEPT_ROWS = 64
"""Row sets :func:`scratch_rows` keeps (one per dtype, row count and length) before it
starts afresh."""


def scratch_rows(like: torch.Tensor, count: int, n: int) -> list[torch.Tensor]:
    """``count`` receive rows of ``n`` elements each, side by side in :func:`scratch`'s
    buffer — the very same tensor objects from call to call while the buffer stays.

    A view is a new tensor each time it is cut, a microsecond or two on an idle core but
    several times that inside a rank whose cores gloo's threads and other ranks share: a
    two-rank exchange of 64 KiB ran 26–50 µs a call slower receiving into a row cut afresh
    than into a kept one, timed side by side in one launch (benchmarks/NOTES.md, "The
    algorithm's own Python"). Same one-user-at-a-time rule as :func:`scratch`."""
    base = _scratch_base(like, count * n)
    key = (like.device, like.dtype, count, n)
    rows = _ROWS.get(key)
    if rows is None:
        if len(_ROWS) >= MAX_KEPT_ROWS:
            _ROWS.clear()
        rows = _ROWS[key] = [base[i * n:(i + 1) * n] for i in range(count)]
    return rows


def segments_of(tensor: torch.Tensor, count: int) -> list[torch.Tensor]:
    """``tensor`` cut into ``count`` contiguous segments by
    :func:`~simulator.collectives.chunks.chunk_bounds` (the simulated twin cuts its bytes alike)."""
    return [tensor[lo:hi] for lo, hi in chunk_bounds(tensor.numel(), count)]


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
