"""The run-time side of one simulation: bytes moved along routes, channels shared as their
links' contention model says (:mod:`simulator.core.network`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Generator, Sequence
from typing import Any

import simpy

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
                 "fifo", "latency_s", "one_way_pair", "simultaneous")

    def __init__(self, topology: Topology, src: int, dst: int) -> None:
        self.channels = topology.route(src, dst)
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
        self.fair = [c for c, link in zip(self.channels, links, strict=True)
                     if link.contention == "fair"]
        # the pair's connection, both directions alike (shared_bus's connection_by_load)
        connection = connection_channel(src, dst)
        if (src != dst and frozenset(connection) in topology.links
                and topology.link(connection).contention == "fair"):
            self.fair.append(connection)
        # the reverse directions that carry this transfer's acknowledgements, and their share
        self.acks = [((c[1], c[0]), host.ack_fraction)
                     for c, link, host in zip(self.channels, links, hosts, strict=True)
                     if link.contention == "fair" and host.ack_fraction > 0]
        self.cap = min((link.bandwidth_Bps for link in links if link.contention != "fair"),
                       default=math.inf)


class _Flow:
    """A transfer in the bandwidth phase on ``fair`` channels.

    ``buffered``, if given, is triggered once ``remaining`` ≤ ``buffer_bytes`` (the moment a
    blocking send returns to a sender whose socket buffer holds ``buffer_bytes``). ``weight``:
    what each byte takes of a channel it shares, ``lone_weight`` of a channel it crosses alone
    (a queued send's, :meth:`Network.transfer`).
    """

    __slots__ = ("acks", "buffer_bytes", "buffered", "cap", "channels", "done", "lone_weight",
                 "rate", "remaining", "size", "weight")

    def __init__(self, nbytes: float, channels: Sequence[Channel], cap: float,
                 done: simpy.Event,
                 acks: Sequence[tuple[Channel, float]] = (),
                 buffered: simpy.Event | None = None, buffer_bytes: float = 0.0,
                 weight: float = 1.0, lone_weight: float = 1.0) -> None:
        self.remaining = float(nbytes)
        self.size = float(nbytes)  # the whole message: what a by-load channel counts
        self.channels = channels
        self.cap = cap
        self.done = done
        self.rate = 0.0
        self.acks = acks
        self.buffered = buffered
        self.buffer_bytes = float(buffer_bytes)
        self.weight = weight
        self.lone_weight = lone_weight

    def until_buffered(self) -> float:
        """Bytes still to move before ``buffered`` fires (inf: no such event pending)."""
        if self.buffered is None or self.buffered.triggered:
            return math.inf
        return max(self.remaining - self.buffer_bytes, 0.0)


class Network:
    """Moves bytes along a :class:`Topology` inside one SimPy environment.

    ``transfer`` is a SimPy process body: wait the route's latency (α, summed over hops), then
    push the bytes through at the rate the links' contention models allow.

    Fair-share rates are recomputed once per instant, after every transfer starting or ending
    at that instant has been counted: a step in which ``p`` ranks start sending costs one
    max-min allocation, not ``p`` of them.
    """

    def __init__(self, env: simpy.Environment, topology: Topology) -> None:
        self.env = env
        self.topology = topology
        self.bytes_per_channel: dict[Channel, int] = {}
        self._fifo: dict[Channel, simpy.Resource] = {}
        self._paths: dict[tuple[int, int], _Path] = {}
        self._bandwidth_Bps: dict[Channel, float] = {}
        self._solo_Bps: dict[Channel, float | None] = {}
        self._flows: list[_Flow] = []
        self._last_update = 0.0
        self._version = 0
        self._settling = False
        self._in_flight: dict[Channel, int] = {}
        # host effects of links whose rate depends on the bytes they carry at once, by channel
        self._by_load: dict[Channel, LinkEffects] = {}
        for key, link in topology.links.items():
            if link.host is not None and link.host.bandwidth_by_load:
                a, b = tuple(key)
                self._by_load[(a, b)] = self._by_load[(b, a)] = link.host
        # messages in flight by (src, dst), kept where a path has a one-way pair latency
        self._between: dict[tuple[int, int], int] = {}

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
        path = self._paths.get((src, dst))
        if path is None:
            path = self._paths[(src, dst)] = _Path(self.topology, src, dst)
        for channel in path.channels:
            self.bytes_per_channel[channel] = self.bytes_per_channel.get(channel, 0) + nbytes
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
                self._add_flow(_Flow(nbytes, path.fair, path.cap, done, path.acks,
                                     buffered, buffer_bytes, weight, lone_weight))
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

    def _advance(self) -> None:
        elapsed = self.env.now - self._last_update
        if elapsed > 0:
            for flow in self._flows:
                flow.remaining -= flow.rate * elapsed
        self._last_update = self.env.now

    def _add_flow(self, flow: _Flow) -> None:
        self._advance()
        self._flows.append(flow)
        self._invalidate()

    def _invalidate(self) -> None:
        """The rates are out of date: disarm the wake-up, and settle once later this instant."""
        self._version += 1
        if not self._settling:
            self._settling = True
            self.env.process(self._settle())

    def _settle(self) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(0)  # after whatever else starts or ends at this instant
        self._settling = False
        self._advance()
        self._reschedule()

    def _reschedule(self) -> None:
        """Recompute max-min fair rates and arm a wake-up for the next completion."""
        self._allocate()
        self._version += 1
        if not self._flows:
            return
        dt = min(min(max(f.remaining, 0.0), f.until_buffered()) / f.rate
                 for f in self._flows)
        self.env.process(self._wake(dt, self._version))

    def _wake(self, dt: float, version: int) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(dt)
        if version != self._version:
            return  # a transfer started or ended since: a newer wake-up is armed
        self._advance()
        # Finished: what is left would take under a picosecond (floating-point dust).
        for flow in self._flows:
            if flow.until_buffered() <= flow.rate * 1e-12:
                assert flow.buffered is not None
                flow.buffered.succeed()
        finished = [f for f in self._flows if f.remaining <= f.rate * 1e-12]
        self._flows = [f for f in self._flows if f.remaining > f.rate * 1e-12]
        for flow in finished:
            flow.done.succeed()
        self._invalidate()

    def _bandwidth(self, channel: Channel) -> float:
        bandwidth = self._bandwidth_Bps.get(channel)
        if bandwidth is None:
            bandwidth = self._bandwidth_Bps[channel] = self.topology.link(channel).bandwidth_Bps
        return bandwidth

    def _solo(self, channel: Channel) -> float | None:
        if channel not in self._solo_Bps:
            self._solo_Bps[channel] = _effects(self.topology.link(channel)).solo_bandwidth_Bps
        return self._solo_Bps[channel]

    def _allocate(self) -> None:
        """Progressive filling: raise all unfrozen rates together until a channel fills.

        ``users[c]`` counts the unfrozen flows on channel ``c`` (a flow whose acknowledgements
        cross ``c`` counts the link's ``ack_fraction``, :class:`LinkEffects`; a flow that
        shares ``c`` with another counts its ``weight``, and one alone on ``c`` its
        ``lone_weight``); a flow freezes when one of its channels is full or it reaches its
        cap, and leaves its channels' counts. A channel's solo rate applies while one flow
        crosses it.
        """
        left: dict[Channel, float] = {}
        users: dict[Channel, float] = {}
        flows: dict[Channel, float] = {}  # flows and acknowledgements, unweighted
        crossing: dict[Channel, int] = {}  # flows only
        load: dict[Channel, float] = {}
        for flow in self._flows:
            flow.rate = 0.0
            for channel in flow.channels:
                left[channel] = self._bandwidth(channel)
                crossing[channel] = crossing.get(channel, 0) + 1
                load[channel] = load.get(channel, 0.0) + flow.size
            for channel, share in flow.acks:
                left[channel] = self._bandwidth(channel)
                users[channel] = users.get(channel, 0) + share
                flows[channel] = flows.get(channel, 0) + share

        def weight(flow: _Flow, channel: Channel) -> float:
            return flow.weight if crossing[channel] > 1 else flow.lone_weight

        for flow in self._flows:
            for channel in flow.channels:
                users[channel] = users.get(channel, 0) + weight(flow, channel)
                flows[channel] = flows.get(channel, 0) + 1
        for channel, count in flows.items():
            solo = self._solo(channel)
            if solo is not None and count <= 1 + 1e-12:
                left[channel] = solo
            elif channel in self._by_load:
                left[channel] = self._by_load[channel].rate_at_load(load.get(channel, 0.0))
        full_at = {c: 1e-9 * rate for c, rate in left.items()}  # of what it can carry now
        active = self._flows
        while active:
            step = min((left[c] / n for c, n in users.items() if n > 1e-12), default=math.inf)
            step = min(step, min(f.cap - f.rate for f in active))
            for flow in active:
                flow.rate += step
            for c, n in users.items():
                left[c] -= step * n
            unfrozen = []
            for flow in active:
                full = any(left[c] <= full_at[c]
                           for c in itertools.chain(flow.channels, (a for a, _ in flow.acks)))
                if full or flow.rate >= flow.cap * (1 - 1e-12):
                    for c in flow.channels:
                        users[c] -= weight(flow, c)
                    for c, share in flow.acks:
                        users[c] -= share
                else:
                    unfrozen.append(flow)
            active = unfrozen
