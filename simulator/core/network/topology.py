"""Topologies: ranks and switches joined by links, with a route for every rank pair
(:mod:`simulator.core.network`)."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from simulator.core.network.host_hooks import LinkEffects
from simulator.core.network.link import Channel, Contention, Link, Node

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
        exchanges measures (:mod:`lab.calibrate`). That much is the textbook tier; every
        further argument is a host effect, stored in the bus's (or the ports' and
        connections') :class:`LinkEffects`, where each is explained. A message that starts
        while the bus carries another pays ``busy_latency_s`` instead of α — or, given
        ``busy_latency_by_flows``, its entry for the number of messages already in flight.
        ``solo_bus_Bps``: the bus's rate while it carries a single message (``None``:
        ``bus_Bps`` always). ``count_simultaneous``: messages that start at one instant all
        count one another as in flight; ``one_way_pair_latency_s``: what a message pays with
        one other in flight that is not its reverse; ``bus_by_load``: the bus's rate by the
        bytes it carries at once.

        ``connection_by_load``: each pair of ranks also has a *connection*
        (:func:`connection_channel`), one channel that both directions of the pair's messages
        cross, with this rate by load while it carries two or more at once and no limit while
        it carries one. Gloo's ranks talk over one TCP connection per pair, and a send written
        by the calling thread holds the connection that the partner's message must be read
        from (benchmarks/NOTES.md, "Who writes the bytes"): a swap's two messages move slower
        than two messages one way each over different connections, as a ring's do (empty: no
        connections).

        ``port_by_load``: each port's rate by the bytes it carries at once (empty: ``port``'s
        bandwidth) — a lone message's rate by its size, solved from the ping-pong
        (:func:`simulator.host.pingpong.port_rates`).
        """
        port_link = replace(port, latency_s=0.0).with_host(
            bandwidth_by_load=tuple((float(a), float(b)) for a, b in port_by_load))
        bus = replace(port, bandwidth_Bps=bus_Bps).with_host(
            busy_latency_s=busy_latency_s, busy_latency_by_flows=tuple(busy_latency_by_flows),
            solo_bandwidth_Bps=solo_bus_Bps, count_simultaneous=count_simultaneous,
            one_way_pair_latency_s=one_way_pair_latency_s,
            bandwidth_by_load=tuple((float(a), float(b)) for a, b in bus_by_load))
        links: dict[frozenset[Node], Link] = {frozenset(("bus_in", "bus_out")): bus}
        for r in range(world_size):
            links[frozenset((r, "bus_in"))] = port_link
            links[frozenset((r, "bus_out"))] = port_link
        if connection_by_load:
            connection = Link(0.0, UNLIMITED_Bps, port.contention, LinkEffects(
                solo_bandwidth_Bps=UNLIMITED_Bps,
                bandwidth_by_load=tuple((float(a), float(b)) for a, b in connection_by_load)))
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


def _hop_cost(link: Link) -> float:
    """What a hop costs when choosing routes: α + 1 MiB/B, s."""
    return link.latency_s + 2**20 / link.bandwidth_Bps


def _other(key: frozenset[Node], node: Node) -> Node:
    (other,) = key - {node}
    return other


def _node_order(node: Node) -> tuple[int, int, str]:
    return (0, node, "") if isinstance(node, int) else (1, 0, node)
