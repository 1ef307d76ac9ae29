"""A cluster cut to one group of its ranks, with their real links: what the fast path
simulates instead of the whole cluster (:mod:`simulator.tensor_parallel.fast`)."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.core.hardware import Cluster
from simulator.core.network import Link, Node, Topology


def subcluster(cluster: Cluster, ranks: Sequence[int]) -> Cluster:
    """The ranks ``ranks`` of ``cluster`` (renumbered ``0…k−1``) with their own links: every
    link at one of them, every switch-to-switch link, and the full cluster's routes.

    Exact for traffic among these ranks while no other rank's traffic crosses the same
    channels (the symmetry the fast path relies on). Needs routes that go through switches,
    not through other ranks (true of every builder but ``ring`` and ``fully_connected``).
    """
    local: dict[int, int] = {g: i for i, g in enumerate(ranks)}
    if len(local) != len(ranks):
        raise ValueError("a subcluster lists a rank twice")
    full = cluster.topology

    def rename(node: Node) -> Node:
        if isinstance(node, str):
            return node
        if node not in local:
            raise ValueError(f"route passes through rank {node}, outside the subcluster")
        return local[node]

    links: dict[frozenset[Node], Link] = {}
    switches: list[Node] = []
    for g in ranks:  # the ranks' own links, and the switches they reach
        for node in full._adjacent.get(g, []):
            if isinstance(node, int) and node not in local:
                continue
            links[frozenset((local[g], rename(node)))] = full.links[frozenset((g, node))]
            if isinstance(node, str) and node not in switches:
                switches.append(node)
    for switch in switches:  # then every switch-to-switch link beyond them
        for node in full._adjacent.get(switch, []):
            if isinstance(node, str):
                links[frozenset((switch, node))] = full.links[frozenset((switch, node))]
                if node not in switches:
                    switches.append(node)

    def router(topo: Topology, src: int, dst: int) -> list[Node]:
        if src == dst:
            return [src]
        channels = full.route(ranks[src], ranks[dst])
        return [src] + [rename(c[1]) for c in channels]

    topology = Topology(len(ranks), links, f"{full.name}[{len(ranks)}]", router)
    sub = Cluster(f"{cluster.name}[{len(ranks)}]", tuple(cluster.devices[g] for g in ranks),
                  topology)
    if cluster.host is None:
        return sub
    # of the host effects, the sends' socket buffering (a shaped network's) carries over
    return sub.with_host(buffered_sends=cluster.host.buffered_sends,
                         send_buffer_bytes=cluster.host.send_buffer_bytes)
