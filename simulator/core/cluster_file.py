"""A cluster described by a file: the cluster the lab measured, as the simulator's model.

A preset (:data:`simulator.core.hardware.PRESETS`) comes from data sheets. A *cluster file*
comes from ``distml-lab calibrate --cluster-out FILE`` (or ``python -m lab.run --cluster-out``
on torchrun's ranks across machines): the same textbook model — a device with a compute rate
and a memory bandwidth, links with a latency α and a bandwidth 1/β, inside a node and between
nodes — with every number measured on the cluster by primitives
(:mod:`backends.cluster_probe`), plus the measurements themselves for the reader. Any command
that takes ``--cluster`` takes the file's path (a name ending ``.json``).

Format (JSON, ``"format": "distml-cluster/1"``)::

    {"format": "distml-cluster/1", "name": "…", "ranks_per_node": 8,
     "device": {"name": …, "flops_per_s": …, "mem_bandwidth_Bps": …, "memory_bytes": …},
     "intra": {"latency_s": …, "bandwidth_Bps": …},
     "inter": {"latency_s": …, "bandwidth_Bps": …} | null,
     "measured": {…the probe's tables: p2p, all-reduce bus bandwidth, GEMM by shape…}}

``flops_per_s`` is the best GEMM throughput measured among the probed shapes (what the
kernels achieve, not the data sheet's peak); ``mem_bandwidth_Bps`` the measured copy rate.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.core.atomic import write_atomic
from simulator.core.hardware import Cluster, Device, preset
from simulator.core.network import Link, Topology

FORMAT = "distml-cluster/1"


@dataclass(frozen=True)
class ClusterFile:
    """A measured cluster: devices and links per level, and what was measured."""

    name: str
    device: Device
    intra: Link
    inter: Link | None
    ranks_per_node: int
    measured: dict[str, Any] = field(default_factory=dict)

    def cluster(self, world_size: int) -> Cluster:
        """The simulated cluster of ``world_size`` ranks: one switch of ``intra`` links on one
        node, nodes of :attr:`ranks_per_node` joined by ``inter`` links beyond it."""
        if world_size < 1:
            raise ValueError(f"world size must be at least 1, got {world_size}")
        if world_size <= self.ranks_per_node or self.inter is None:
            topo = Topology.switch(world_size, self.intra)
        else:
            nodes = math.ceil(world_size / self.ranks_per_node)
            if nodes * self.ranks_per_node != world_size:
                raise ValueError(f"{world_size} ranks do not fill whole nodes of "
                                 f"{self.ranks_per_node} ({self.name})")
            topo = Topology.two_level(nodes, self.ranks_per_node, self.intra, self.inter)
        return Cluster.homogeneous(f"{self.name}x{world_size}", self.device, topo)

    def to_json(self) -> dict[str, Any]:
        """The file's contents."""
        d = self.device

        def link(x: Link | None) -> dict[str, float] | None:
            return None if x is None else {"latency_s": x.latency_s,
                                           "bandwidth_Bps": x.bandwidth_Bps}

        return {"format": FORMAT, "name": self.name, "ranks_per_node": self.ranks_per_node,
                "device": {"name": d.name, "flops_per_s": d.flops_per_s,
                           "mem_bandwidth_Bps": d.mem_bandwidth_Bps,
                           "memory_bytes": d.memory_bytes},
                "intra": link(self.intra), "inter": link(self.inter),
                "measured": self.measured}


def _positive(doc: dict[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise ValueError(f"{where}.{key} must be a positive number, got {value!r}")
    return float(value)


def _link(doc: Any, where: str) -> Link:
    if not isinstance(doc, dict):
        raise ValueError(f"{where} must be an object with latency_s and bandwidth_Bps")
    latency = doc.get("latency_s")
    if isinstance(latency, bool) or not isinstance(latency, int | float) or not (
            math.isfinite(latency) and latency >= 0):
        raise ValueError(f"{where}.latency_s must be a number ≥ 0, got {latency!r}")
    return Link(latency_s=float(latency), bandwidth_Bps=_positive(doc, "bandwidth_Bps", where))


def load(path: str | Path) -> ClusterFile:
    """Read and check a cluster file.

    Raises:
        ValueError: in one line, naming the file and what is wrong.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cluster file {path}: cannot read it ({type(exc).__name__})") from None
    try:
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file (distml-lab calibrate --cluster-out writes "
                             "one)")
        dev = doc.get("device")
        if not isinstance(dev, dict):
            raise ValueError("device must be an object")
        device = Device(str(dev.get("name", "measured")), _positive(dev, "flops_per_s", "device"),
                        _positive(dev, "mem_bandwidth_Bps", "device"),
                        _positive(dev, "memory_bytes", "device"))
        per_node = doc.get("ranks_per_node")
        if isinstance(per_node, bool) or not isinstance(per_node, int) or per_node < 1:
            raise ValueError(f"ranks_per_node must be a whole number ≥ 1, got {per_node!r}")
        inter = None if doc.get("inter") is None else _link(doc["inter"], "inter")
        return ClusterFile(str(doc.get("name", path.stem)), device, _link(doc.get("intra"),
                           "intra"), inter, per_node, dict(doc.get("measured") or {}))
    except ValueError as exc:
        raise ValueError(f"cluster file {path}: {exc}") from None


def save(cluster: ClusterFile, path: str | Path) -> Path:
    """Write ``cluster`` to ``path`` at once (a crash leaves no half-written file)."""
    path = Path(path)
    write_atomic(path, (json.dumps(cluster.to_json(), indent=2) + "\n").encode())
    return path


def is_cluster_file(name: str) -> bool:
    """Whether a ``--cluster`` value names a file rather than a preset."""
    return name.endswith(".json")


def resolve(name: str, world_size: int) -> Cluster:
    """A cluster by ``--cluster`` value: a cluster file's path or a preset's name."""
    if is_cluster_file(name):
        return load(name).cluster(world_size)
    return preset(name, world_size)
