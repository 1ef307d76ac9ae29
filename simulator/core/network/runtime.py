"""The run-time side of one simulation: bytes moved along routes, channels shared as their
links' contention model says (:mod:`simulator.core.network`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import Any

import simpy

from simulator.core.network.fair import FairShare, Flow
from simulator.core.network.host_hooks import LinkEffects
from simulator.core.network.link import Channel, Link
from simulator.core.network.topology import Topology, connection_channel

_TEXTBOOK = LinkEffects()
"""What a link without host effects (``Link.host`` ``None``) does: nothing beyond α, B and
its contention model."""


def _effects(link: Link) -> LinkEffects:
    """A link's host effects, the defaults (none) in the textbook tier."""
    return link.host or _TEXTBOOK


def _busy_latency(link: Link, others: int) -> float:
    """A link's α for a message that starts while ``others`` (≥ 1) are in flight, s."""
    host = _effects(link)
    if host.busy_latency_by_flows:
        table = host.busy_latency_by_flows
        return table[min(others, len(table)) - 1]
    return link.latency_s if host.busy_latency_s is None else host.busy_latency_s


# ---- run time ---------------------------------------------------------------------------------

class _Path:
    """What :meth:`Network.transfer` needs to know about one route, worked out once."""

    __slots__ = ("acks", "busy", "busy_by_flows", "busy_latency_s", "cap", "channels", "fair",
                 "fifo", "latency_s", "nbytes", "one_way_pair", "simultaneous", "touches")

    def __init__(self, topology: Topology, src: int, dst: int) -> None:
        self.channels = topology.route(src, dst)
        self.nbytes = 0  # bytes sent along this route so far
        links = [topology.link(c) for c in self.channels]
        hosts = [_effects(link) for link in links]
        self.latency_s = sum(link.latency_s for link in links)
        # channels whose latency grows while they carry another message, and the path's α then
        self.busy = [c for c, host in zip(self.channels, hosts, strict=True)
                     if host.busy_latency_s is not None]
        self.simultaneous = any(host.count_simultaneous for c, host in
                                zip(self.channels, hosts, strict=True) if c in self.busy)
        # with one other in flight that is not this message's reverse (None: as any other)
        pair = [host.one_way_pair_latency_s for host in hosts]
        self.one_way_pair = (None if all(x is None for x in pair) else
                             sum(_busy_latency(link, 1) if x is None else x
                                 for link, x in zip(links, pair, strict=True)))
        self.busy_latency_s = sum(link.latency_s if host.busy_latency_s is None
                                  else host.busy_latency_s
                                  for link, host in zip(links, hosts, strict=True))
        # the path's α with k others in flight (entry k − 1), where a link has such a table
        longest = max((len(host.busy_latency_by_flows) for host in hosts), default=0)
        self.busy_by_flows = tuple(
            sum(_busy_latency(link, k) for link in links) for k in range(1, longest + 1))
        # a global lock order over fifo channels: no two transfers wait on each other
        self.fifo = sorted((c for c, link in zip(self.channels, links, strict=True)
                            if link.contention == "fifo"), key=lambda c: tuple(map(str, c)))
        fair = [c for c, link in zip(self.channels, links, strict=True)
                if link.contention == "fair"]
        # the pair's connection, both directions alike (shared_bus's connection_by_load)
        connection = connection_channel(src, dst)
        if (src != dst and frozenset(connection) in topology.links
                and topology.link(connection).contention == "fair"):
            fair.append(connection)
        self.fair = tuple(fair)  # hashable: fair sharing keeps rates by route
        # the reverse directions that carry this transfer's acknowledgements, and their share
        self.acks = [((c[1], c[0]), host.ack_fraction)
                     for c, link, host in zip(self.channels, links, hosts, strict=True)
                     if link.contention == "fair" and host.ack_fraction > 0]
        self.cap = min((link.bandwidth_Bps for link in links if link.contention != "fair"),
                       default=math.inf)
        # every channel a flow on this path uses: its fair channels, then its acknowledgements'
        self.touches = (*self.fair, *(c for c, _ in self.acks))


class Network(FairShare):
    """Moves bytes along a :class:`Topology` inside one SimPy environment.

    ``transfer`` is a SimPy process body: wait the route's latency (α, summed over hops), then
    push the bytes through at the rate the links' contention models allow.

    :meth:`post` does the same without a process, where the route allows. The bandwidth
    phase on ``fair`` channels is a flow of :class:`~simulator.core.network.fair.FairShare`.
    """

    def __init__(self, env: simpy.Environment, topology: Topology) -> None:
        super().__init__(env, topology)
        self._fifo: dict[Channel, simpy.Resource] = {}
        self._paths: dict[tuple[int, int], _Path] = {}
        self._in_flight: dict[Channel, int] = {}
        # messages in flight by (src, dst), kept where a path has a one-way pair latency
        self._between: dict[tuple[int, int], int] = {}

    @property
    def bytes_per_channel(self) -> dict[Channel, int]:
        """Bytes that crossed each directed link so far (summed over the routes used)."""
        counts: dict[Channel, int] = {}
        for path in self._paths.values():
            for channel in path.channels:
                counts[channel] = counts.get(channel, 0) + path.nbytes
        return counts

    def _path(self, src: int, dst: int) -> _Path:
        path = self._paths.get((src, dst))
        if path is None:
            path = self._paths[(src, dst)] = _Path(self.topology, src, dst)
        return path

    def post(self, src: int, dst: int, nbytes: int, arrived: Callable[[Any], Any],
             value: Any = None) -> None:
        """Deliver ``nbytes`` from ``src`` to ``dst`` as :meth:`transfer` does, calling
        ``arrived(value)`` when the last byte is in — without a SimPy process: a timer for α,
        then a flow (or a timer for ``n/B``), all plain callbacks. That is most of a large
        simulation's messages, and each process costs several events. Only for routes that
        need no process (:func:`simulator.core.world.direct_messages`): no busy latency, no
        one-way pair latency, no ``fifo`` channel."""
        path = self._paths.get((src, dst)) or self._path(src, dst)
        if path.busy or path.fifo or path.one_way_pair is not None:
            raise ValueError(f"the route {src} -> {dst} needs Network.transfer")
        path.nbytes += nbytes
        if path.latency_s <= 0:
            self._begin((path, nbytes, arrived, value))
        elif nbytes and path.fair:  # the flow starts after α (what _begin would do then)
            self._later(path.latency_s, self._add_flow,
                        Flow(nbytes, path.fair, path.cap, arrived, value, path.acks,
                             touches=path.touches))
        else:
            self._later(path.latency_s, self._begin, (path, nbytes, arrived, value))

    def _begin(self, message: tuple[_Path, int, Callable[[Any], Any], Any]) -> None:
        """The bandwidth phase of :meth:`post`."""
        path, nbytes, arrived, value = message
        if nbytes == 0 or not path.channels:
            arrived(value)
        elif path.fair:
            self._add_flow(Flow(nbytes, path.fair, path.cap, arrived, value, path.acks,
                                touches=path.touches))
        else:
            self._later(nbytes / path.cap, arrived, value)

    def transfer(self, src: int, dst: int, nbytes: int, buffered: simpy.Event | None = None,
                 buffer_bytes: float = 0.0, weight: float = 1.0, lone_weight: float = 1.0
                 ) -> Generator[simpy.Event, Any, None]:
        """Deliver ``nbytes`` from rank ``src`` to rank ``dst`` (a process body).

        ``buffered``, if given, is triggered when at most ``buffer_bytes`` of the message are
        still to move (at once if ``nbytes`` ≤ ``buffer_bytes``): a sender's socket buffer
        holds the rest, so its blocking send returns then (the cluster's host effects,
        :class:`~simulator.core.host_hooks.ClusterEffects`). Bytes waiting behind another
        message on a ``fifo`` channel count as unsent. ``weight``: what each byte takes of the
        capacity of each ``fair`` channel that it shares with another message (1: a byte),
        ``lone_weight`` of each ``fair`` channel it crosses alone — a queued send's
        (:class:`simulator.core.comm.SimComm`).
        """
        if buffered is not None and nbytes <= buffer_bytes:
            buffered.succeed()
            buffered = None
        path = self._path(src, dst)
        path.nbytes += nbytes
        for c in path.busy:
            self._in_flight[c] = self._in_flight.get(c, 0) + 1
        paired = path.one_way_pair is not None  # only then who sends to whom matters
        if paired:
            self._between[(src, dst)] = self._between.get((src, dst), 0) + 1
        try:
            latency = path.latency_s
            if path.busy:
                if path.simultaneous:  # count every message that starts at this instant first
                    yield self.env.timeout(0)
                others = max(self._in_flight[c] for c in path.busy) - 1
                if others == 1 and paired and not self._between.get((dst, src)):
                    assert path.one_way_pair is not None
                    latency = path.one_way_pair  # two messages one way each, not a swap
                elif others and path.busy_by_flows:
                    latency = path.busy_by_flows[min(others, len(path.busy_by_flows)) - 1]
                elif others:
                    latency = path.busy_latency_s
            yield from self._move(path, latency, nbytes, buffered, buffer_bytes, weight,
                                  lone_weight)
        finally:
            for c in path.busy:
                self._in_flight[c] -= 1
            if paired:
                self._between[(src, dst)] -= 1

    def _move(self, path: _Path, latency: float, nbytes: int,
              buffered: simpy.Event | None = None, buffer_bytes: float = 0.0,
              weight: float = 1.0, lone_weight: float = 1.0
              ) -> Generator[simpy.Event, Any, None]:
        """The latency, then the bytes at the rate the contention models allow."""
        if latency > 0:
            yield self.env.timeout(latency)
        if nbytes == 0 or not path.channels:
            if buffered is not None:
                buffered.succeed()
            return
        requests = []
        for channel in path.fifo:
            resource = self._fifo.setdefault(channel, simpy.Resource(self.env, capacity=1))
            request = resource.request()
            requests.append((resource, request))
            yield request
        try:
            if path.fair:
                done = self.env.event()
                self._add_flow(Flow(nbytes, path.fair, path.cap, done.succeed, None, path.acks,
                                    buffered, buffer_bytes, weight, lone_weight, path.touches))
                yield done
            elif buffered is not None:
                yield self.env.timeout((nbytes - buffer_bytes) / path.cap)
                buffered.succeed()
                yield self.env.timeout(buffer_bytes / path.cap)
            else:
                yield self.env.timeout(nbytes / path.cap)
        finally:
            for resource, request in requests:
                resource.release(request)

    # -- max-min fair sharing ---------------------------------------------------------------
