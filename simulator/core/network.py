"""The network: links, topologies, and how concurrent transfers share a link.

The α-β model (Hockney 1994) prices one message of ``n`` bytes on a link at

    T(n) = α + n / B

with α the latency (s) and B the bandwidth (bytes/s), i.e. β = 1/B s per byte. A
:class:`Link` carries α and B and is *full duplex*: each direction is its own channel, so a
send ``a -> b`` never slows a send ``b -> a``.

What the formula leaves out is **contention**: several transfers crossing one channel at once.
Each link chooses one of three models:

``none``
    Pure α-β. Every transfer sees the whole bandwidth, however many share the link. With
    ``none`` on a fully connected topology a simulation equals the textbook closed form.
``fifo``
    Transfers queue: one at a time crosses the channel at full bandwidth, in arrival order.
``fair``
    Processor sharing: transfers crossing a channel split its bandwidth. Across a multi-hop
    route the rates are the *max-min fair* allocation (progressive filling, Bertsekas &
    Gallager, *Data Networks*, §6.5.2), recomputed whenever a transfer starts or ends. Two
    equal transfers started together on one link each take 2n/B.

A :class:`Topology` is a graph of ranks (ints) and switches (strings) joined by links, with a
route for every rank pair; the builders make the usual shapes. :class:`Network` is the run-time
side used by one simulation: it moves bytes along routes and counts them per channel.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import simpy

Contention = Literal["none", "fifo", "fair"]
CONTENTION_MODELS: tuple[str, ...] = ("none", "fifo", "fair")
Node = int | str
Channel = tuple[Node, Node]
"""A link in one direction, ``(from, to)``."""


@dataclass(frozen=True)
class Link:
    """A full-duplex link.

    Attributes:
        latency_s: α, the time before the first byte arrives, s.
        bandwidth_Bps: B, bytes per second in each direction.
        contention: ``none``, ``fifo`` or ``fair`` (see the module docstring).
        busy_latency_s: α for a message that starts while the link already carries another
            one, s (``None``: always ``latency_s``). On a host whose ranks share cores, a
            message that arrives while other copies are in progress waits for its process to
            be scheduled again: its latency is a scheduling delay, not the idle α.
        busy_latency_by_flows: the same by how many messages are in flight when it starts:
            entry ``k − 1`` with ``k`` others in flight (the last entry for more), s; empty:
            ``busy_latency_s`` whatever their number. On a host of ``c`` cores the delay grows
            with the number of ranks that are runnable at once (:mod:`lab.calibrate`'s chain
            of dependent exchanges among ``k`` ranks measures it).
        ack_fraction: bytes a transfer crossing this link in one direction puts on the
            *other* direction per byte it carries (TCP's acknowledgements), in units of the
            link's bandwidth; 0 leaves the directions independent. Counted by ``fair`` sharing
            only: a port that sends while it receives carries its own data plus the
            acknowledgements of what it receives.
        solo_bandwidth_Bps: B in each direction while a single transfer crosses the channel,
            bytes/s (``None``: always ``bandwidth_Bps``). Counted by ``fair`` sharing only. A
            host's loopback "bus" moves one message at the rate a ping-pong measures but several
            at once at the aggregate rate concurrent exchanges measure, which may be lower:
            each byte is copied by the CPUs at both ends, and two messages each way keep both
            cores busy with four copies (:meth:`Topology.shared_bus`).
        count_simultaneous: with a busy latency, messages that start at the same instant count
            one another as in flight (each pays the entry for all the others) instead of in
            whatever order the simulation happens to start them (the first none, the second
            one, …). Where ranks post a step together, as a collective's do, none of them is
            the first; counted in order, the ranks whose messages came first run ahead of the
            others step after step, and fewer messages are in flight than on the real host.
        one_way_pair_latency_s: with a table, the busy latency of a message that starts with
            exactly one other in flight when that other is not its reverse — two messages one
            way each, not a swap — s (``None``: the table's first entry, whatever the other).
            The table's first entry is measured by a chain between two ranks, which is a swap.
        bandwidth_by_load: the channel's aggregate rate by the bytes of the messages it
            carries at once, ``((load_bytes, Bps), …)`` by increasing load, interpolated
            log-linearly between points and flat beyond the ends (empty: ``bandwidth_Bps``
            whatever the load). Counted by ``fair`` sharing only, and only while it carries two
            or more messages (one alone moves at ``solo_bandwidth_Bps``). A host's loopback copies
            messages through its caches: two 512 KiB messages crossing at once move their bytes
            about two and a half times as fast as two 8 MiB ones, whose copies run at the speed
            of memory.
    """

    latency_s: float
    bandwidth_Bps: float
    contention: Contention = "fair"
    busy_latency_s: float | None = None
    ack_fraction: float = 0.0
    busy_latency_by_flows: tuple[float, ...] = ()
    solo_bandwidth_Bps: float | None = None
    count_simultaneous: bool = False
    one_way_pair_latency_s: float | None = None
    bandwidth_by_load: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if not self.latency_s >= 0:
            raise ValueError(f"link latency must be >= 0 s, got {self.latency_s}")
        if not self.bandwidth_Bps > 0:
            raise ValueError(f"link bandwidth must be > 0 bytes/s, got {self.bandwidth_Bps}")
        if self.contention not in CONTENTION_MODELS:
            raise ValueError(f"unknown contention model {self.contention!r}; "
                             f"choose one of {', '.join(CONTENTION_MODELS)}")
        if not 0.0 <= self.ack_fraction < 1.0:
            raise ValueError(f"ack_fraction must be in [0, 1), got {self.ack_fraction}")
        if self.solo_bandwidth_Bps is not None and not self.solo_bandwidth_Bps > 0:
            raise ValueError(f"solo bandwidth must be > 0 bytes/s, got {self.solo_bandwidth_Bps}")
        loads = [load for load, _ in self.bandwidth_by_load]
        if any(not (load > 0 and rate > 0) for load, rate in self.bandwidth_by_load) or (
                loads != sorted(set(loads))):
            raise ValueError("bandwidth_by_load needs positive loads, increasing, with positive "
                             f"rates; got {self.bandwidth_by_load}")

    @property
    def beta_s_per_B(self) -> float:
        """β = 1/B, seconds per byte."""
        return 1.0 / self.bandwidth_Bps

    def time(self, nbytes: float) -> float:
        """α + n/B: the uncontended time of one ``nbytes`` message, s."""
        return self.latency_s + nbytes / self.bandwidth_Bps

    def rate_at_load(self, load_bytes: float) -> float:
        """The aggregate rate while messages totalling ``load_bytes`` cross, bytes/s
        (:attr:`bandwidth_by_load`, or ``bandwidth_Bps`` without a table)."""
        if not self.bandwidth_by_load:
            return self.bandwidth_Bps
        return log_interpolate(self.bandwidth_by_load, load_bytes)


def log_interpolate(table: Sequence[tuple[float, float]], x: float) -> float:
    """The value at ``x`` of a table ``((x, y), …)`` by increasing ``x`` > 0: linear in
    log ``x`` between its points, flat beyond its ends."""
    if x <= table[0][0]:
        return table[0][1]
    for (lo, a), (hi, b) in itertools.pairwise(table):
        if x <= hi:
            return a + (b - a) * math.log(x / lo) / math.log(hi / lo)
    return table[-1][1]


Router = Callable[["Topology", int, int], list[Node]]


@dataclass
class Topology:
    """Ranks ``0..world_size-1`` and switches, joined by links, with routing.

    Routes are shortest paths by cost α + 1 MiB/B (so a fast NVLink hop beats a slow NIC hop
    of the same length), ties broken by node order; a builder may pass its own ``router``
    (the fat tree spreads flows over its spines; the switch and two-level builders name their
    shortest paths directly, sparing a search per pair on thousands of ranks). Routes are
    computed once per pair and cached.
    """

    world_size: int
    links: dict[frozenset[Node], Link]
    name: str = "custom"
    router: Router | None = None
    _adjacent: dict[Node, list[Node]] = field(default_factory=dict, init=False, repr=False)
    _routes: dict[tuple[int, int], tuple[Channel, ...]] = field(
        default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ValueError(f"a topology needs at least 1 rank, got {self.world_size}")
        for key in self.links:
            if len(key) != 2:
                raise ValueError(f"a link joins two different nodes, got {set(key)}")
            for node in key:
                self._adjacent.setdefault(node, []).append(_other(key, node))
        for node in self._adjacent:
            self._adjacent[node].sort(key=_node_order)

    @property
    def contention(self) -> str:
        """The contention model of the links (``mixed`` if they differ)."""
        models = {link.contention for link in self.links.values()}
        return models.pop() if len(models) == 1 else "mixed"

    def link(self, channel: Channel) -> Link:
        """The link under a channel."""
        return self.links[frozenset(channel)]

    def route(self, src: int, dst: int) -> tuple[Channel, ...]:
        """The channels a message from rank ``src`` to rank ``dst`` crosses, in order."""
        key = (src, dst)
        cached = self._routes.get(key)
        if cached is not None:
            return cached
        for r in key:
            if not 0 <= r < self.world_size:
                raise ValueError(f"rank {r} is not in this {self.world_size}-rank topology")
        nodes = self.router(self, src, dst) if self.router else self._shortest_path(src, dst)
        channels = tuple(itertools.pairwise(nodes))
        self._routes[key] = channels
        return channels

    def path_latency_s(self, src: int, dst: int) -> float:
        """Sum of α along the route, s."""
        return sum(self.link(c).latency_s for c in self.route(src, dst))

    def path_bandwidth_Bps(self, src: int, dst: int) -> float:
        """Bandwidth of the slowest link on the route, bytes/s."""
        route = self.route(src, dst)
        return min((self.link(c).bandwidth_Bps for c in route), default=math.inf)

    def with_contention(self, contention: Contention) -> Topology:
        """The same graph with every link's contention model replaced."""
        links = {k: replace(v, contention=contention) for k, v in self.links.items()}
        return Topology(self.world_size, links, self.name, self.router)

    def _shortest_path(self, src: Node, dst: Node) -> list[Node]:
        if src == dst:
            return [src]
        order = itertools.count()
        best: dict[Node, float] = {src: 0.0}
        parent: dict[Node, Node] = {}
        heap: list[tuple[float, int, Node]] = [(0.0, next(order), src)]
        while heap:
            cost, _, node = heapq.heappop(heap)
            if node == dst:
                break
            if cost > best[node]:
                continue
            for nxt in self._adjacent.get(node, []):
                link = self.links[frozenset((node, nxt))]
                new = cost + link.latency_s + 2**20 / link.bandwidth_Bps
                if new < best.get(nxt, math.inf) * (1 - 1e-12):
                    best[nxt] = new
                    parent[nxt] = node
                    heapq.heappush(heap, (new, next(order), nxt))
        if dst not in parent:
            raise ValueError(f"no route from rank {src} to rank {dst} in topology {self.name!r}")
        path = [dst]
        while path[-1] != src:
            path.append(parent[path[-1]])
        return path[::-1]

    # ---- builders --------------------------------------------------------------------------

    @classmethod
    def fully_connected(cls, world_size: int, link: Link) -> Topology:
        """A direct link between every pair of ranks."""
        links: dict[frozenset[Node], Link] = {
            frozenset((a, b)): link for a in range(world_size) for b in range(a + 1, world_size)}
        return cls(world_size, links, "fully_connected")

    @classmethod
    def ring(cls, world_size: int, link: Link) -> Topology:
        """Rank ``r`` linked to ``r+1 mod p``; messages take the shorter way round."""
        links: dict[frozenset[Node], Link] = {
            frozenset((r, (r + 1) % world_size)): link
            for r in range(world_size) if r != (r + 1) % world_size}
        return cls(world_size, links, "ring")

    @classmethod
    def switch(cls, world_size: int, link: Link) -> Topology:
        """A star: every rank has one port to a central switch ``"sw"``.

        ``link`` describes a rank-to-rank path: each of the two hops gets half its latency, so
        an uncontended message costs exactly ``link.time(n)``; the port is the shared resource.
        """
        port = replace(link, latency_s=link.latency_s / 2)
        links: dict[frozenset[Node], Link] = {frozenset((r, "sw")): port
                                              for r in range(world_size)}

        def router(topo: Topology, src: int, dst: int) -> list[Node]:
            return [src] if src == dst else [src, "sw", dst]  # the only path: no search

        return cls(world_size, links, "switch", router)

    @classmethod
    def two_level(cls, nodes: int, ranks_per_node: int, intra: Link, inter: Link) -> Topology:
        """Nodes of ``ranks_per_node`` ranks (e.g. GPUs on NVSwitch) joined by a fabric.

        Inside node ``k`` every rank has a port to switch ``"node{k}"`` (``intra``, e.g.
        NVLink); every rank also has its own NIC port to the fabric switch ``"fabric"``
        (``inter``, e.g. InfiniBand), as in a DGX with one NIC per GPU. As in
        :meth:`switch`, each hop carries half of the path latency.
        """
        world_size = nodes * ranks_per_node
        links: dict[frozenset[Node], Link] = {}
        intra_port = replace(intra, latency_s=intra.latency_s / 2)
        inter_port = replace(inter, latency_s=inter.latency_s / 2)
        for r in range(world_size):
            links[frozenset((r, f"node{r // ranks_per_node}"))] = intra_port
            if nodes > 1:
                links[frozenset((r, "fabric"))] = inter_port
        # The shortest paths, without a search per pair (thousands of ranks): between nodes
        # the fabric; inside a node the node switch unless the fabric hop is cheaper (a tie
        # goes to the fabric, as the search would have it).
        via_node = nodes == 1 or _hop_cost(intra_port) < _hop_cost(inter_port)

        def router(topo: Topology, src: int, dst: int) -> list[Node]:
            if src == dst:
                return [src]
            node = src // ranks_per_node
            if via_node and dst // ranks_per_node == node:
                return [src, f"node{node}", dst]
            return [src, "fabric", dst]

        return cls(world_size, links, "two_level", router)

    @classmethod
    def fat_tree(cls, world_size: int, hosts_per_leaf: int, spines: int,
                 host_link: Link, spine_link: Link) -> Topology:
        """A two-tier leaf-spine fat tree.

        Ranks hang off leaf switches ``"leaf{i}"`` (``hosts_per_leaf`` each, by ``host_link``);
        every leaf links to every spine ``"spine{j}"`` (``spine_link``). A message between
        leaves goes up to spine ``(src + dst) mod spines`` — a fixed ECMP-like spread, so the
        routing is deterministic. Full bisection when ``spines * spine_link`` bandwidth
        matches ``hosts_per_leaf * host_link``.
        """
        leaves = math.ceil(world_size / hosts_per_leaf)
        links: dict[frozenset[Node], Link] = {}
        for r in range(world_size):
            links[frozenset((r, f"leaf{r // hosts_per_leaf}"))] = host_link
        if leaves > 1:
            for i in range(leaves):
                for j in range(spines):
                    links[frozenset((f"leaf{i}", f"spine{j}"))] = spine_link

        def router(topo: Topology, src: int, dst: int) -> list[Node]:
            if src == dst:
                return [src]
            a, b = f"leaf{src // hosts_per_leaf}", f"leaf{dst // hosts_per_leaf}"
            if a == b:
                return [src, a, dst]
            return [src, a, f"spine{(src + dst) % spines}", b, dst]

        return cls(world_size, links, "fat_tree", router)


    @classmethod
    def shared_bus(cls, world_size: int, port: Link, bus_Bps: float,
                   busy_latency_s: float | None = None,
                   busy_latency_by_flows: Sequence[float] = (),
                   solo_bus_Bps: float | None = None,
                   count_simultaneous: bool = False,
                   one_way_pair_latency_s: float | None = None,
                   bus_by_load: Sequence[tuple[float, float]] = (),
                   connection_by_load: Sequence[tuple[float, float]] = (),
                   port_by_load: Sequence[tuple[float, float]] = ()) -> Topology:
        """Ranks on one machine: each has a port, and *every* message crosses one shared bus.

        Ranks that are processes on one host talk over loopback: each message is copied by
        the CPUs through the kernel, so concurrent messages compete for the same cores and
        memory bus however their endpoints differ. A message from ``a`` to ``b`` goes
        ``a -> "bus_in" -> "bus_out" -> b``: rank ``a``'s port (``port``), the shared bus
        channel (``bus_Bps``, carrying the whole path latency ``port.latency_s``), then
        ``b``'s port. One message alone moves at ``min(port, bus)``; ``k`` at once share the
        bus (with ``fair`` contention), which is what a calibration with concurrent
        exchanges measures (:mod:`lab.calibrate`). A message that starts while the bus carries
        another pays ``busy_latency_s`` instead of α — or, given ``busy_latency_by_flows``,
        its entry for the number of messages already in flight (see :class:`Link`).
        ``solo_bus_Bps``: the bus's rate while it carries a single message (``None``:
        ``bus_Bps`` always; see :class:`Link`). ``count_simultaneous``: messages that start
        at one instant all count one another as in flight; ``one_way_pair_latency_s``: what a
        message pays with one other in flight that is not its reverse; ``bus_by_load``: the
        bus's rate by the bytes it carries at once (see :class:`Link`).

        ``connection_by_load``: each pair of ranks also has a *connection*
        (:func:`connection_channel`), one channel that both directions of the pair's messages
        cross, with this rate by load while it carries two or more at once and no limit while
        it carries one. Gloo's ranks talk over one TCP connection per pair, and a send written
        by the calling thread holds the connection that the partner's message must be read
        from (chapter 2, "Who writes the bytes"): a swap's two messages move slower than two
        messages one way each over different connections, as a ring's do (empty: no
        connections).

        ``port_by_load``: each port's rate by the bytes it carries at once (empty: ``port``'s
        bandwidth) — a lone message's rate by its size, solved from the ping-pong
        (:func:`simulator.host.pingpong.port_rates`).
        """
        port_link = replace(port, latency_s=0.0,
                            bandwidth_by_load=tuple((float(a), float(b)) for a, b in port_by_load))
        bus = replace(port, bandwidth_Bps=bus_Bps, busy_latency_s=busy_latency_s,
                      busy_latency_by_flows=tuple(busy_latency_by_flows),
                      solo_bandwidth_Bps=solo_bus_Bps, count_simultaneous=count_simultaneous,
                      one_way_pair_latency_s=one_way_pair_latency_s,
                      bandwidth_by_load=tuple((float(a), float(b)) for a, b in bus_by_load))
        links: dict[frozenset[Node], Link] = {frozenset(("bus_in", "bus_out")): bus}
        for r in range(world_size):
            links[frozenset((r, "bus_in"))] = port_link
            links[frozenset((r, "bus_out"))] = port_link
        if connection_by_load:
            connection = Link(0.0, UNLIMITED_Bps, port.contention,
                              solo_bandwidth_Bps=UNLIMITED_Bps,
                              bandwidth_by_load=tuple((float(a), float(b))
                                                      for a, b in connection_by_load))
            for a in range(world_size):
                for b in range(a + 1, world_size):
                    links[frozenset(connection_channel(a, b))] = connection

        def router(topo: Topology, src: int, dst: int) -> list[Node]:
            return [src] if src == dst else [src, "bus_in", "bus_out", dst]

        return cls(world_size, links, "shared_bus", router)


UNLIMITED_Bps = 1e18
"""The rate of a connection that carries one message (:meth:`Topology.shared_bus`), bytes/s:
never the one that limits it (a billion GB/s; finite, so that max-min filling can tell when a
channel is full)."""


def connection_channel(a: int, b: int) -> Channel:
    """The channel of the connection between ranks ``a`` and ``b`` (:meth:`Topology.shared_bus`):
    the same for both directions, between two nodes of its own that no route visits."""
    lo, hi = min(a, b), max(a, b)
    return (f"connection {lo}-{hi} a", f"connection {lo}-{hi} b")


def _busy_latency(link: Link, others: int) -> float:
    """A link's α for a message that starts while ``others`` (≥ 1) are in flight, s."""
    if link.busy_latency_by_flows:
        table = link.busy_latency_by_flows
        return table[min(others, len(table)) - 1]
    return link.latency_s if link.busy_latency_s is None else link.busy_latency_s


def _hop_cost(link: Link) -> float:
    """What a hop costs when choosing routes: α + 1 MiB/B, s."""
    return link.latency_s + 2**20 / link.bandwidth_Bps


def _other(key: frozenset[Node], node: Node) -> Node:
    (other,) = key - {node}
    return other


def _node_order(node: Node) -> tuple[int, int, str]:
    return (0, node, "") if isinstance(node, int) else (1, 0, node)


# ---- run time ---------------------------------------------------------------------------------

class _Path:
    """What :meth:`Network.transfer` needs to know about one route, worked out once."""

    __slots__ = ("acks", "busy", "busy_by_flows", "busy_latency_s", "cap", "channels", "fair",
                 "fifo", "latency_s", "one_way_pair", "simultaneous")

    def __init__(self, topology: Topology, src: int, dst: int) -> None:
        self.channels = topology.route(src, dst)
        links = [topology.link(c) for c in self.channels]
        self.latency_s = sum(link.latency_s for link in links)
        # channels whose latency grows while they carry another message, and the path's α then
        self.busy = [c for c, link in zip(self.channels, links, strict=True)
                     if link.busy_latency_s is not None]
        self.simultaneous = any(link.count_simultaneous for c, link in
                                zip(self.channels, links, strict=True) if c in self.busy)
        # with one other in flight that is not this message's reverse (None: as any other)
        pair = [link.one_way_pair_latency_s for link in links]
        self.one_way_pair = (None if all(x is None for x in pair) else
                             sum(_busy_latency(link, 1) if x is None else x
                                 for link, x in zip(links, pair, strict=True)))
        self.busy_latency_s = sum(link.latency_s if link.busy_latency_s is None
                                  else link.busy_latency_s for link in links)
        # the path's α with k others in flight (entry k − 1), where a link has such a table
        longest = max((len(link.busy_latency_by_flows) for link in links), default=0)
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
        self.acks = [((c[1], c[0]), link.ack_fraction)
                     for c, link in zip(self.channels, links, strict=True)
                     if link.contention == "fair" and link.ack_fraction > 0]
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
        # links whose rate depends on the bytes they carry at once, by channel
        self._by_load: dict[Channel, Link] = {}
        for key, link in topology.links.items():
            if link.bandwidth_by_load:
                a, b = tuple(key)
                self._by_load[(a, b)] = self._by_load[(b, a)] = link
        # messages in flight by (src, dst), kept where a path has a one-way pair latency
        self._between: dict[tuple[int, int], int] = {}

    def transfer(self, src: int, dst: int, nbytes: int, buffered: simpy.Event | None = None,
                 buffer_bytes: float = 0.0, weight: float = 1.0, lone_weight: float = 1.0
                 ) -> Generator[simpy.Event, Any, None]:
        """Deliver ``nbytes`` from rank ``src`` to rank ``dst`` (a process body).

        ``buffered``, if given, is triggered when at most ``buffer_bytes`` of the message are
        still to move (at once if ``nbytes`` ≤ ``buffer_bytes``): a sender's socket buffer
        holds the rest, so its blocking send returns then (:class:`Cluster`'s
        ``send_buffer_bytes``). Bytes waiting behind another message on a ``fifo`` channel
        count as unsent. ``weight``: what each byte takes of the capacity of each ``fair``
        channel that it shares with another message (1: a byte), ``lone_weight`` of each
        ``fair`` channel it crosses alone — a queued send's
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
            self._solo_Bps[channel] = self.topology.link(channel).solo_bandwidth_Bps
        return self._solo_Bps[channel]

    def _allocate(self) -> None:
        """Progressive filling: raise all unfrozen rates together until a channel fills.

        ``users[c]`` counts the unfrozen flows on channel ``c`` (a flow whose acknowledgements
        cross ``c`` counts its ``ack_fraction``; a flow that shares ``c`` with another counts
        its ``weight``, and one alone on ``c`` its ``lone_weight``); a flow freezes when one of
        its channels is full or it reaches its cap, and leaves its channels' counts. A
        channel's solo rate applies while one flow crosses it.
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
