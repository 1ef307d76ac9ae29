"""What the simulated collectives' tests share: a test device, clusters built on it, and the
trace read as steps or as bytes per rank."""

from simulator.core import Cluster, Device, Link, Topology

DEV = Device("test", flops_per_s=1e12, mem_bandwidth_Bps=9e9, memory_bytes=1e9)
"""The default device; a test whose numbers need another γ passes its own ``device``."""


def cluster(topo, device=DEV):
    return Cluster.homogeneous("t", device, topo)


def fully_connected(p, alpha=1e-5, bw=1e9, model="none", device=DEV):
    return cluster(Topology.fully_connected(p, Link(alpha, bw, model)), device)


def sends_by_step(result):
    """(sender->receiver, bytes) grouped by start time (α = 1 s, bytes ~free)."""
    steps: dict[int, list[tuple[str, int]]] = {}
    for s in result.trace:
        if s.kind == "send":
            steps.setdefault(round(s.start), []).append((s.name.removeprefix("send "), s.nbytes))
    return [sorted(sends) for _, sends in sorted(steps.items())]


def send_names_by_step(result):
    """Sends (sender->receiver) grouped by start time, as :func:`sends_by_step` without bytes."""
    return [[name for name, _ in step] for step in sends_by_step(result)]


def per_rank(result, kind, p):
    """Bytes each rank sent (``send``), received (``recv``) or combined (``reduce``)."""
    out = [0] * p
    for s in result.trace:
        if s.kind == kind:
            out[s.rank] += s.nbytes
    return out


def received(result, p):
    """Bytes each rank received."""
    return per_rank(result, "recv", p)
