"""Chapter 16, reference answer: bytes per task per step and their α-β time (exercise in
``exercises/ch16_partition_bytes.py``; the lab's own counts are
:func:`backends.tf_runtime.partition.bytes_sent` and :func:`simulator.tf_runtime.step_bytes`)."""

from __future__ import annotations

from backends.tf_runtime.cluster import ClusterSpec
from backends.tf_runtime.graph import GraphDef


def _messages(graph: GraphDef, cluster: ClusterSpec) -> list[tuple[int, int]]:
    """``(sender rank, bytes)`` of every message of a step: each pair's tensor forward, its
    gradient back when it needs one."""
    node = {n.name: n for n in graph.nodes}
    seen: set[tuple[str, int]] = set()
    out = []
    for v in graph.nodes:
        dst = cluster.rank(v.device)
        for name in v.inputs:
            u, src = node[name], cluster.rank(node[name].device)
            if src != dst and (name, dst) not in seen:
                seen.add((name, dst))
                out.append((src, u.nbytes))
                if u.needs_grad:
                    out.append((dst, u.nbytes))
    return out


def bytes_per_task(graph: GraphDef, cluster: ClusterSpec) -> list[int]:
    """The messages' bytes summed by sender."""
    sent = [0] * cluster.world_size
    for rank, nbytes in _messages(graph, cluster):
        sent[rank] += nbytes
    return sent


def transfer_time_s(graph: GraphDef, cluster: ClusterSpec, alpha_s: float,
                    beta_s_per_B: float) -> float:
    """``Σ (α + nβ)`` over the messages."""
    return sum(alpha_s + nbytes * beta_s_per_B for _, nbytes in _messages(graph, cluster))
