"""Chapter 16, reference answer: the Send/Recv pairs of a placed graph (exercise in
``exercises/ch16_send_recv.py``; the lab's own is :func:`backends.tf_runtime.partition.
partition`)."""

from __future__ import annotations

from backends.tf_runtime.cluster import ClusterSpec
from backends.tf_runtime.graph import GraphDef
from backends.tf_runtime.rendezvous import rendezvous_key

Pair = tuple[str, int, int, str]


def send_recv_pairs(graph: GraphDef, cluster: ClusterSpec, incarnation: int = 1) -> list[Pair]:
    """A pair for each (tensor, destination task) that crosses, made by its first reader."""
    device = {n.name: n.device for n in graph.nodes}
    pairs: list[Pair] = []
    made: set[tuple[str, int]] = set()
    for v in graph.nodes:
        dst = cluster.rank(v.device)
        for u in v.inputs:
            src = cluster.rank(device[u])
            if src != dst and (u, dst) not in made:
                made.add((u, dst))
                pairs.append((u, src, dst,
                              rendezvous_key(device[u], incarnation, v.device, f"{u}:0")))
    return pairs
