"""SimComm: one rank's view of a simulated process group, named after ``torch.distributed``.

An algorithm is written once per rank, SPMD style, as a generator function that takes a
:class:`SimComm` and yields SimPy events — the simulated twin of a function that calls
``dist.send``/``dist.recv`` on a real process group::

    def ping_pong(comm: SimComm, nbytes: int):
        if comm.rank == 0:
            yield from comm.send(1, nbytes)
            yield from comm.recv(1, nbytes)
        elif comm.rank == 1:
            yield from comm.recv(0, nbytes)
            yield from comm.send(0, nbytes)

    result = run_spmd(cluster, ping_pong, nbytes=2**20)
    result.makespan_s

Messaging follows MPI/``torch.distributed`` rules: a send is *eager* (bytes start moving when it
is posted), a receive completes when the matching message has arrived, and messages between
the same two ranks with the same tag never overtake each other. That is the textbook tier; a
cluster of the host tier changes it by its host effects (:attr:`Cluster.host`, a
:class:`~simulator.core.host_hooks.ClusterEffects`). With ``receiver_driven_sends`` (gloo's
TCP transport) a send's bytes wait for the receiver to post the matching receive and for its
*receive-ready* notice to cross back (``ready_notice_s``, or one path latency α): a sender
that runs ahead of its receiver waits for it. Such a send is *queued* if the notice had not
come when its rank began to post it (gloo then writes it from its I/O thread when the notice
comes): each of its bytes takes :meth:`~ClusterEffects.queued_weight` of the capacity of the
links it shares (and :meth:`~ClusterEffects.lone_queued_weight` of those it crosses alone).
On a host whose ranks' threads outnumber its cores — the lab's two cores hold every rank's
calling thread and its I/O thread — a notice that comes while a rank is posting is read only
once it stops, so a send posted right after its step's receive is queued however short the
notice. Where the host has a ``post_overhead_s`` (LogP's *o*), posting a send or a receive
takes that much of the rank's time: posts and local work on one rank queue one after
another. Besides messages a rank can spend time on ``compute(flops)``, ``reduce(nbytes)`` and
``memcpy(nbytes)`` on its device, and account memory with ``alloc``/``free``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, cast

import simpy

from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.core.host_hooks import ClusterEffects
from simulator.core.kernel import Kernel
from simulator.core.network import Channel, Network
from simulator.core.world import SimDeadlock as SimDeadlock  # re-exported: part of the API
from simulator.core.world import SimWork as SimWork
from simulator.core.world import World, direct_messages

SimGen = Generator[simpy.Event, Any, Any]
"""What a rank program (or a step of one) is: a generator of SimPy events."""

_BARRIER_TAG = -1
_GC_ALLOCATIONS = 100_000  # objects allocated between two collections during a simulation


class SimComm:
    """One rank of a simulated process group (or sub-group).

    ``rank`` and ``world_size`` are relative to the group, as in ``torch.distributed``;
    peers are named by group rank.
    """

    def __init__(self, world: World, global_rank: int,
                 ranks: tuple[int, ...] | None = None) -> None:
        self._world = world
        self.global_rank = global_rank
        # the default group's tuple and id are made once (World.everyone)
        self.ranks, self._group = (world.everyone() if ranks is None
                                   else (ranks, world.group_id(ranks)))
        self.rank = global_rank if ranks is None else ranks.index(global_rank)
        self.world_size = len(self.ranks)
        self.device = world.cluster.devices[global_rank]

    # -- basics ---------------------------------------------------------------------------

    @property
    def env(self) -> simpy.Environment:
        """The SimPy environment."""
        return self._world.env

    @property
    def now(self) -> float:
        """Simulated time, s."""
        return float(self._world.env.now)

    def span(self, kind: str, name: str, start: float, nbytes: int = 0) -> None:
        """Record a span on this rank from ``start`` to now (no-op when tracing is off)."""
        if self._world.trace is not None:
            self._world.trace.record(self.global_rank, kind, name, start, self.now, nbytes)

    def new_group(self, ranks: list[int] | tuple[int, ...]) -> SimComm | None:
        """A sub-group of these ranks (group ranks), or ``None`` if this rank is not in it."""
        members = tuple(self.ranks[r] for r in ranks)
        if len(set(members)) != len(members):
            raise ValueError(f"a group lists a rank twice: {list(ranks)}")
        if self.global_rank not in members:
            return None
        return SimComm(self._world, self.global_rank, members)

    # -- point to point --------------------------------------------------------------------

    def _key(self, src: int, dst: int, tag: int) -> tuple[Any, ...]:
        return (self._group, self.ranks[src], self.ranks[dst], tag)

    def _check_peer(self, peer: int) -> None:
        if not 0 <= peer < self.world_size:
            raise ValueError(f"rank {self.rank}: peer {peer} is not in a group of "
                             f"{self.world_size}")

    def _post(self, tag: int) -> tuple[float, float]:
        """Charge this rank one post's CPU time (the host's ``post_overhead_s``, LogP's *o*)
        after whatever it is still posting or doing; when the post begins and is done, s."""
        overhead = self._world.host.post_overhead_s
        if not overhead or tag == _BARRIER_TAG:
            return self.now, self.now
        began = max(self.now, self._world.posted_until[self.global_rank])
        done = self._world.posted_until[self.global_rank] = began + overhead
        return began, done

    def _until(self, when: float) -> SimGen:
        if when > self.now:
            yield self.env.timeout(when - self.now)

    def isend(self, dst: int, nbytes: int, tag: int = 0) -> SimWork:
        """Start sending ``nbytes`` to group rank ``dst``; the work completes on delivery —
        or at once on a cluster whose sends are ``buffered`` (the host's
        :attr:`~ClusterEffects.buffered_sends`: the bytes still travel, but the sender is
        free) — or, where the host also has a socket send buffer of S bytes
        (:meth:`~ClusterEffects.send_buffer`), once at most S bytes of the message are still
        to move."""
        self._check_peer(dst)
        if self._world.direct:
            return SimWork(self._send_direct(dst, nbytes, tag))
        key = self._key(self.rank, dst, tag)
        seq = self._world.sent.get(key, 0)
        self._world.sent[key] = seq + 1
        host = self._world.host
        buffered = host.buffered_sends and tag != _BARRIER_TAG
        buffer = host.send_buffer(nbytes) if buffered else None  # once per send
        returned = self.env.event() if buffer is not None else None
        began, posted = self._post(tag)
        delivery = self.env.process(self._deliver(dst, nbytes, (*key, seq), tag, returned,
                                                  began, posted, buffer_bytes=buffer or 0.0))
        if returned is not None:
            return SimWork(returned)
        if buffered:
            return SimWork(self.env.timeout(0))
        return SimWork(delivery)

    def _send_direct(self, dst: int, nbytes: int, tag: int) -> simpy.Event:
        """A send without a process (:func:`~simulator.core.world.direct_messages`): the
        network calls the arrival's ``succeed(nbytes)`` when the last byte is in."""
        world, to = self._world, self.ranks[dst]
        arrival = world.meet((self._group, self.global_rank, to, tag), True, nbytes)
        if world.trace is None or tag == _BARRIER_TAG:
            world.network.post(self.global_rank, to, nbytes, arrival.succeed, nbytes)
            return arrival
        start = self.now

        def arrived(_: None) -> None:  # with tracing: the send's span too
            arrival.succeed(nbytes)
            self.span("send", f"send {self.rank}->{dst}", start, nbytes)

        world.network.post(self.global_rank, to, nbytes, arrived)
        return arrival

    def _deliver(self, dst: int, nbytes: int, key: tuple[Any, ...], tag: int,
                 returned: simpy.Event | None = None, began: float = 0.0,
                 posted: float = 0.0, buffer_bytes: float = 0.0) -> SimGen:
        host = self._world.host
        queued = False
        yield from self._until(posted)
        if host.receiver_driven_sends and tag != _BARRIER_TAG:
            came = yield self._world.ready_notice(key)
            del self._world.ready[key]
            queued = came >= began  # the notice was not there before the rank began the post
        start = self.now
        yield from self._world.network.transfer(
            self.global_rank, self.ranks[dst], nbytes, returned, buffer_bytes,
            host.queued_weight(nbytes) if queued else 1.0,
            host.lone_queued_weight(nbytes) if queued else 1.0)
        self._world.arrival(key).succeed(nbytes)
        if tag != _BARRIER_TAG:
            self.span("send", f"send {self.rank}->{dst}", start, nbytes)

    def irecv(self, src: int, nbytes: int | None = None, tag: int = 0) -> SimWork:
        """Post a receive from group rank ``src``; the work's value is the bytes received."""
        self._check_peer(src)
        if self._world.direct:
            return SimWork(self._recv_direct(src, nbytes, tag))
        key = self._key(src, self.rank, tag)
        seq = self._world.received.get(key, 0)
        self._world.received[key] = seq + 1
        _, posted = self._post(tag)
        if self._world.host.receiver_driven_sends and tag != _BARRIER_TAG:
            self.env.process(self._notify_ready(src, (*key, seq), posted))
        return SimWork(self.env.process(self._await(src, nbytes, (*key, seq), tag, posted)))

    def _recv_direct(self, src: int, nbytes: int | None, tag: int) -> simpy.Event:
        """A receive without a process: the message's arrival event, sizes checked when
        sender and receiver meet; with tracing, a callback of the arrival records the span."""
        world = self._world
        arrival = world.meet((self._group, self.ranks[src], self.global_rank, tag), False,
                             nbytes, (self.rank, src))
        if world.trace is None or tag == _BARRIER_TAG:
            return arrival
        start = self.now

        def matched(event: simpy.Event) -> None:
            self.span("recv", f"recv {src}->{self.rank}", start, cast(int, event.value))

        if arrival.callbacks is None:  # arrived and processed before the receive was posted
            matched(arrival)
        else:
            arrival.callbacks.append(matched)
        return arrival

    def _notify_ready(self, src: int, key: tuple[Any, ...], posted: float = 0.0) -> SimGen:
        """gloo's receive-ready notice: a small control message back to the sender; it takes
        the host's ``ready_notice_s`` (or the idle path latency α), whatever else is in flight
        (it carries no payload), from the moment the receive is posted."""
        yield from self._until(posted)
        latency = self._world.host.ready_notice_s
        if latency is None:
            latency = self._world.cluster.topology.path_latency_s(self.global_rank,
                                                                  self.ranks[src])
        if latency > 0:
            yield self.env.timeout(latency)
        self._world.ready_notice(key).succeed(self.now)  # its value: when it came

    def _await(self, src: int, nbytes: int | None, key: tuple[Any, ...], tag: int,
               posted: float = 0.0) -> SimGen:
        start = self.now
        got = yield self._world.arrival(key)
        yield from self._until(posted)  # a message cannot complete a receive not yet posted
        del self._world.arrivals[key]  # matched: forget it, so long runs stay fast
        if nbytes is not None and got != nbytes:
            raise ValueError(f"rank {self.rank} expected {nbytes} B from rank {src} "
                             f"(tag {tag}) but {got} B were sent")
        if tag != _BARRIER_TAG:
            self.span("recv", f"recv {src}->{self.rank}", start, got)
        return got

    def send(self, dst: int, nbytes: int, tag: int = 0) -> SimGen:
        """Blocking send: ``yield from comm.send(dst, nbytes)``."""
        yield from self._blocking(self.isend(dst, nbytes, tag), ("send to", dst, tag))

    def recv(self, src: int, nbytes: int | None = None, tag: int = 0) -> SimGen:
        """Blocking receive: ``got = yield from comm.recv(src, nbytes)``."""
        return (yield from self._blocking(self.irecv(src, nbytes, tag), ("recv from", src, tag)))

    def _blocking(self, work: SimWork, what: tuple[str, int | None, int]) -> SimGen:
        """Wait for ``work``, noting what for (verb, peer, tag) in case the run deadlocks."""
        self._world.waiting[self.global_rank] = what
        value = yield work.wait()
        self._world.waiting.pop(self.global_rank, None)
        return value

    def barrier(self) -> SimGen:
        """Dissemination barrier (Hensgen et al. 1988): ⌈lg p⌉ rounds of empty messages."""
        start, distance = self.now, 1
        while distance < self.world_size:
            self.isend((self.rank + distance) % self.world_size, 0, _BARRIER_TAG)
            yield from self._blocking(
                self.irecv((self.rank - distance) % self.world_size, 0, _BARRIER_TAG),
                ("barrier", None, _BARRIER_TAG))
            distance *= 2
        self.span("wait", "barrier", start)

    # -- local work -----------------------------------------------------------------------

    def _busy(self, kind: str, seconds: float, nbytes: int = 0, name: str = "") -> SimGen:
        world = self._world
        if world.posted_until:  # local work waits for the rank's own posts
            yield from self._until(world.posted_until[self.global_rank])
        if world.trace is None:
            yield world.env.timeout(seconds)
            return
        start = self.now
        yield world.env.timeout(seconds)
        self.span(kind, name or kind, start, nbytes)

    def compute(self, flops: float, name: str = "compute") -> SimGen:
        """Spend ``flops`` / device FLOP/s seconds computing."""
        yield from self._busy("compute", flops / self.device.flops_per_s, 0, name)

    def reduce(self, nbytes: int, name: str = "reduce") -> SimGen:
        """Combine ``nbytes`` of received data into a local buffer: γ·n seconds, or what a
        reduction among messages costs on the host (:meth:`Cluster.reduce_s`)."""
        yield from self._busy("reduce", self._world.cluster.reduce_s(self.global_rank, nbytes),
                              nbytes, name)

    def memcpy(self, nbytes: int, name: str = "memcpy") -> SimGen:
        """Copy ``nbytes`` locally."""
        yield from self._busy("memcpy", nbytes / self.device.memcpy_Bps, nbytes, name)

    def alloc(self, nbytes: int) -> None:
        """Account ``nbytes`` more memory in use on this rank (peaks are reported)."""
        r, w = self.global_rank, self._world
        w.memory[r] += nbytes
        w.peak_memory[r] = max(w.peak_memory[r], w.memory[r])

    def free(self, nbytes: int) -> None:
        """Account ``nbytes`` released on this rank."""
        self._world.memory[self.global_rank] -= nbytes


@dataclass(frozen=True)
class SimResult:
    """What one simulated run produced.

    Attributes:
        makespan_s: time at which the last rank finished, s.
        finish_s: each rank's finish time, s.
        returns: each rank program's return value.
        trace: the spans recorded (empty when tracing was off).
        bytes_per_channel: bytes that crossed each directed link.
        peak_memory_bytes: each rank's peak of ``alloc``-accounted memory.
    """

    makespan_s: float
    finish_s: list[float]
    returns: list[Any]
    trace: Trace
    bytes_per_channel: dict[Channel, int]
    peak_memory_bytes: list[int]

    @property
    def total_bytes(self) -> int:
        """Bytes summed over every link crossing (a 2-hop message counts twice)."""
        return sum(self.bytes_per_channel.values())


Program = Callable[..., SimGen]


def run_spmd(cluster: Cluster, program: Program, *args: Any, trace: bool = True,
             calls: int = 1, **kwargs: Any) -> SimResult:
    """Run ``program(comm, *args, **kwargs)`` on every rank of ``cluster``; return the result.

    ``calls``: every rank runs the program that many times back to back (its return value is
    the last call's), as a benchmark loop does; ``makespan_s / calls`` is then the time per
    call of a sustained run, where a rank that finished call ``k`` starts call ``k + 1`` while
    others are still busy with call ``k``.

    Raises:
        SimDeadlock: when events run out while a rank still waits, naming the ranks and what
            each was waiting for.
    """
    return _run(cluster, program, args, kwargs, trace, calls, lean=True)


def _run(cluster: Cluster, program: Program, args: tuple[Any, ...], kwargs: dict[str, Any],
         trace: bool, calls: int, lean: bool) -> SimResult:
    """:func:`run_spmd` on the :class:`~simulator.core.kernel.Kernel`, direct messages where
    allowed (``lean``); else stock SimPy, a process per message: the reference it equals."""
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    env = Kernel() if lean else simpy.Environment()
    p = cluster.world_size
    host = cluster.host or ClusterEffects()
    world = World(env, cluster, Network(env, cluster.topology), Trace() if trace else None,
                   host, memory=[0] * p, peak_memory=[0] * p,
                   posted_until=[0.0] * p if host.post_overhead_s else [],
                   direct=lean and direct_messages(cluster))
    finish = [0.0] * p

    def rank_main(rank: int) -> SimGen:
        comm = SimComm(world, rank)
        value = None
        for _ in range(calls):
            value = yield from program(comm, *args, **kwargs)
        finish[rank] = float(env.now)
        return value

    processes = [env.process(rank_main(r)) for r in range(p)]
    # A large simulation makes millions of short-lived events while every rank's frame stays
    # alive; the collector's passes over those grow with the world. Fewer, larger passes.
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], _GC_ALLOCATIONS), *thresholds[1:])
    try:
        env.run()
    finally:
        gc.set_threshold(*thresholds)
    stuck = [r for r, proc in enumerate(processes) if not proc.triggered]
    if stuck:
        detail = "; ".join(f"rank {r}: {world.waiting_for(r)}" for r in stuck)
        raise SimDeadlock(f"deadlock: {len(stuck)} of {p} ranks never finished ({detail})")
    return SimResult(
        makespan_s=max(finish, default=0.0), finish_s=finish,
        returns=[proc.value for proc in processes], trace=world.trace or Trace(),
        bytes_per_channel=dict(world.network.bytes_per_channel),
        peak_memory_bytes=list(world.peak_memory))
