"""Devices and clusters: what computes, and how it is wired.

A :class:`Device` is one rank's processor — a GPU, or a CPU process — with a compute rate,
memory bandwidth and capacity. A :class:`Cluster` is a list of devices plus a
:class:`~simulator.core.network.Topology`. Both hold the textbook's fields only; the host tier
adds its corrections as one record (:attr:`Cluster.host`, and :attr:`Link.host` per link).
Presets describe well-known machines from their vendors' data sheets
(``../shared/REFERENCES.md``); :mod:`simulator.host` describes *this* machine from its
calibration file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from simulator.core.gemm import GemmModel
from simulator.core.host_hooks import ClusterEffects
from simulator.core.network import Contention, Link, Topology

GB = 1e9
GiB = 2**30


@dataclass(frozen=True)
class Device:
    """One rank's processor.

    Attributes:
        name: e.g. ``"A100-SXM-80GB"``.
        flops_per_s: dense compute rate used by ``compute(flops)``, FLOP/s.
        mem_bandwidth_Bps: memory bandwidth, bytes/s.
        memory_bytes: memory capacity, bytes.
        reduce_Bps: elementwise reduction rate, bytes of output per second. Default: a
            reduction reads two operands and writes one, so ``mem_bandwidth / 3``.
        memcpy_Bps: copy rate, bytes/s. Default: read plus write, ``mem_bandwidth / 2``.
    """

    name: str
    flops_per_s: float
    mem_bandwidth_Bps: float
    memory_bytes: float
    reduce_Bps: float = 0.0
    memcpy_Bps: float = 0.0

    def __post_init__(self) -> None:
        if self.reduce_Bps <= 0:
            object.__setattr__(self, "reduce_Bps", self.mem_bandwidth_Bps / 3)
        if self.memcpy_Bps <= 0:
            object.__setattr__(self, "memcpy_Bps", self.mem_bandwidth_Bps / 2)

    @property
    def gamma_s_per_B(self) -> float:
        """γ, reduction time per byte, s/B."""
        return 1.0 / self.reduce_Bps

    def reduce_s(self, nbytes: float) -> float:
        """Time to reduce ``nbytes`` of received data into a local buffer, γ·n, s."""
        return nbytes / self.reduce_Bps


# NVIDIA A100 Tensor Core GPU data sheet: FP16/BF16 tensor core 312 TFLOP/s dense (624 is with
# 2:4 sparsity); HBM2e 2039 GB/s (80 GB SXM), HBM2 1555 GB/s (40 GB SXM).
A100_80GB = Device("A100-SXM-80GB", 312e12, 2039 * GB, 80 * GiB)
A100_40GB = Device("A100-SXM-40GB", 312e12, 1555 * GB, 40 * GiB)
# NVIDIA H100 Tensor Core GPU data sheet, SXM: FP16/BF16 tensor core 989 TFLOP/s dense (1979
# is with sparsity); HBM3 3.35 TB/s.
H100_80GB = Device("H100-SXM5-80GB", 989e12, 3350 * GB, 80 * GiB)

# GEMM time by shape (simulator.core.gemm): the devices' peak and bandwidth above, plus
# - SMs: 108 on the A100 ("NVIDIA A100 Tensor Core GPU Architecture" whitepaper, 2020: the
#   product enables 108 of GA100's 128 SMs); 132 on the H100 SXM5 ("NVIDIA H100 Tensor Core
#   GPU Architecture" whitepaper, 2022);
# - the output tile: 256×128, one thread block per SM, the tile NVIDIA's "Matrix
#   Multiplication Background User's Guide" (Deep Learning Performance docs, § Wave
#   Quantization) uses for its A100 example of 108 tiles per wave; we keep it for the H100;
# - achievable fraction of peak: the "maximum achievable matmul FLOPS" (MAMF) measured with
#   cuBLAS by a brute-force search over BF16 ``matmul`` shapes, S. Bekman, *Machine Learning
#   Engineering*, "Maximum Achievable Matmul FLOPS comparison table" (CUDA 12.1): A100 SXM
#   267.9 of 312 TFLOP/s (85.9 %), H100 SXM 792.1 of 989 (80.1 %). It is a measurement of the
#   GEMM kernels alone, not of any training run, so no table the model is checked against
#   (the Megatron papers') supplies it; the A100 40 GB is the same chip at the same clocks.
GEMM_TILE = (256, 128)
A100_MAMF_FRACTION = 267.9 / 312
H100_MAMF_FRACTION = 792.1 / 989
GEMM_MODELS: dict[Device, GemmModel] = {
    A100_80GB: GemmModel(A100_80GB.flops_per_s, A100_80GB.mem_bandwidth_Bps, 108, *GEMM_TILE,
                         achievable_fraction=A100_MAMF_FRACTION),
    A100_40GB: GemmModel(A100_40GB.flops_per_s, A100_40GB.mem_bandwidth_Bps, 108, *GEMM_TILE,
                         achievable_fraction=A100_MAMF_FRACTION),
    H100_80GB: GemmModel(H100_80GB.flops_per_s, H100_80GB.mem_bandwidth_Bps, 132, *GEMM_TILE,
                         achievable_fraction=H100_MAMF_FRACTION),
}
"""The GEMM model of each preset GPU; a device not listed computes at its ``flops_per_s``."""

# NVLink: the data sheets give the total of both directions (A100 600 GB/s, H100 900 GB/s);
# a full-duplex Link carries half of it each way. One NIC per GPU, as in a DGX node.
NVLINK3 = Link(latency_s=2e-6, bandwidth_Bps=300 * GB)
NVLINK4 = Link(latency_s=2e-6, bandwidth_Bps=450 * GB)
IB_HDR = Link(latency_s=5e-6, bandwidth_Bps=200e9 / 8)
IB_NDR = Link(latency_s=5e-6, bandwidth_Bps=400e9 / 8)
ETHERNET_10G = Link(latency_s=20e-6, bandwidth_Bps=10e9 / 8)


@dataclass(frozen=True)
class Cluster:
    """Devices (one per rank) and the topology that joins them.

    Attributes:
        name: e.g. ``"dgx-A100-SXM-80GBx16"``.
        devices: one :class:`Device` per rank.
        topology: the links between them.
        host: the host effects on this cluster's sends and reductions
            (:class:`~simulator.core.host_hooks.ClusterEffects`: buffered sends, gloo's
            receiver-driven sends, posting overhead, …), set by the host tier only; ``None``
            in the textbook tier.
    """

    name: str
    devices: tuple[Device, ...]
    topology: Topology
    host: ClusterEffects | None = None

    def __post_init__(self) -> None:
        if len(self.devices) != self.topology.world_size:
            raise ValueError(f"{len(self.devices)} devices for a "
                             f"{self.topology.world_size}-rank topology")

    @property
    def textbook_tier(self) -> bool:
        """No host effects on the cluster or on any of its links: the textbook's model only."""
        return self.host is None and all(
            link.host is None for link in self.topology.links.values())

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return len(self.devices)

    def reduce_s(self, rank: int, nbytes: float) -> float:
        """Time for ``rank`` to reduce ``nbytes`` of received data into a local buffer, s: γ·n
        on its device, or what a reduction among messages costs where the host effects price
        it (:attr:`ClusterEffects.reduce_s_by_bytes`)."""
        if self.host is not None and self.host.reduce_s_by_bytes and nbytes > 0:
            return self.host.reduce_s(nbytes)
        return self.devices[rank].reduce_s(nbytes)

    def with_host(self, **changes: Any) -> Cluster:
        """This cluster with the named fields of its host effects changed
        (:class:`~simulator.core.host_hooks.ClusterEffects`; ``host`` is ``None`` again where
        they all come back to their defaults)."""
        host = replace(self.host or ClusterEffects(), **changes)
        return replace(self, host=None if host == ClusterEffects() else host)

    def with_contention(self, contention: Contention) -> Cluster:
        """The same cluster with every link's contention model replaced."""
        return replace(self, topology=self.topology.with_contention(contention))

    @classmethod
    def homogeneous(cls, name: str, device: Device, topology: Topology) -> Cluster:
        """One ``device`` per rank of ``topology``."""
        return cls(name, (device,) * topology.world_size, topology)

    @classmethod
    def dgx(cls, world_size: int, device: Device = A100_80GB, nvlink: Link = NVLINK3,
            nic: Link = IB_HDR, gpus_per_node: int = 8) -> Cluster:
        """DGX-style nodes of ``gpus_per_node`` GPUs on NVSwitch, one NIC per GPU."""
        nodes = math.ceil(world_size / gpus_per_node)
        per_node = min(world_size, gpus_per_node)
        if nodes * per_node != world_size:
            raise ValueError(f"{world_size} GPUs do not fill whole {gpus_per_node}-GPU nodes")
        topo = Topology.two_level(nodes, per_node, nvlink, nic)
        return cls.homogeneous(f"dgx-{device.name}x{world_size}", device, topo)


def _ethernet(world_size: int) -> Cluster:
    cpu = Device("server-cpu", 2e12, 200 * GB, 512 * GiB)
    return Cluster.homogeneous("ethernet-10g", cpu, Topology.switch(world_size, ETHERNET_10G))


PRESETS: dict[str, tuple[str, Callable[[int], Cluster]]] = {
    "a100": ("DGX A100 nodes: 8 GPUs on NVSwitch (300 GB/s each way), HDR 200 Gb/s per GPU",
             lambda p: Cluster.dgx(p, A100_80GB, NVLINK3, IB_HDR)),
    "h100": ("DGX H100 nodes: 8 GPUs on NVSwitch (450 GB/s each way), NDR 400 Gb/s per GPU",
             lambda p: Cluster.dgx(p, H100_80GB, NVLINK4, IB_NDR)),
    "ethernet-10g": ("CPU servers on one 10 Gb/s Ethernet switch", _ethernet),
}
"""Cluster presets by name: a description and a builder taking the world size."""


def preset(name: str, world_size: int) -> Cluster:
    """A cluster by name, a key of :data:`PRESETS` (this machine's, from its calibration:
    :func:`simulator.host.preset`)."""
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    if name not in PRESETS:
        raise ValueError(f"unknown cluster {name!r}; choose local or one of "
                         f"{', '.join(sorted(PRESETS))}")
    return PRESETS[name][1](world_size)
