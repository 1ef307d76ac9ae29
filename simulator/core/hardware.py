"""Devices and clusters: what computes, and how it is wired.

A :class:`Device` is one rank's processor — a GPU, or a CPU process — with a compute rate,
memory bandwidth and capacity. A :class:`Cluster` is a list of devices plus a
:class:`~simulator.core.network.Topology`. Presets describe well-known machines from their
vendors' data sheets (``../shared/REFERENCES.md``); :mod:`simulator.host` describes *this*
machine from its calibration file.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from simulator.core.network import Contention, Link, Topology, log_interpolate

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
        reduce_s_by_bytes: a reduction's time by its bytes where the collectives run it,
            among messages in flight, ``((bytes, s), …)`` by increasing bytes (empty: γ·n
            alone). Between two sizes linear; below the smallest its time (a cost per
            reduction that does not shrink with the bytes); beyond the largest in proportion
            to the bytes (:mod:`simulator.host.reduction`, :meth:`reduce_s`).
    """

    name: str
    flops_per_s: float
    mem_bandwidth_Bps: float
    memory_bytes: float
    reduce_Bps: float = 0.0
    memcpy_Bps: float = 0.0
    reduce_s_by_bytes: tuple[tuple[float, float], ...] = ()

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
        """Time to reduce ``nbytes`` of received data into a local buffer, s: γ·n, or where
        :attr:`reduce_s_by_bytes` is given, read from it."""
        table = self.reduce_s_by_bytes
        if not table or nbytes <= 0:
            return nbytes / self.reduce_Bps
        if nbytes <= table[0][0]:
            return table[0][1]
        for (lo, a), (hi, b) in itertools.pairwise(table):
            if nbytes <= hi:
                return a + (b - a) * (nbytes - lo) / (hi - lo)
        return table[-1][1] * nbytes / table[-1][0]


A100_80GB = Device("A100-SXM-80GB", 312e12, 2039 * GB, 80 * GiB)
A100_40GB = Device("A100-SXM-40GB", 312e12, 1555 * GB, 40 * GiB)
H100_80GB = Device("H100-SXM5-80GB", 989e12, 3350 * GB, 80 * GiB)

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

    ``buffered_sends``: a send completes as soon as its bytes are handed to the sender's
    network stack, not when they arrive — gloo over TCP sizes the socket's send buffer to the
    message (up to 32 MiB), so on a real network a rank sends to one peer and at once to the
    next while the first message is still on the wire (:meth:`shaped`). Off by default: there
    a send completes on delivery, as MPI's rendezvous sends of large messages do.

    ``send_buffer_bytes``: with ``buffered_sends``, how much of a message the sender's socket
    buffer holds, bytes (``None``: all of it). A blocking send returns once at most this many
    of its bytes are still to move (Linux's TCP lets ``write`` return when the unsent rest fits
    in the socket's send buffer; Stevens, *UNIX Network Programming* §2.11); the transfer
    goes on. Measured by :mod:`lab.calibrate` on a shaped network.
    ``send_buffer_by_bytes``: the same by message size, ``((bytes, buffered bytes), …)``
    interpolated in log size, in place of ``send_buffer_bytes`` where given — on loopback the
    "buffer" is also the receiver's socket, which holds what its I/O thread has not yet read,
    so what a send leaves unsent as it returns grows with the message (the collectives'
    model, from the ping-pong's send returns: :meth:`from_calibration`).

    ``receiver_driven_sends``: a send's bytes move only once the receiver has posted the
    matching receive and its receive-ready notice has come back (one idle path latency α) —
    gloo's TCP pair (``gloo/transport/tcp/pair.cc``: a send waits for the peer's
    "receive ready" notification unless one has already arrived). A receive posted early costs
    nothing; a sender that runs ahead of its receiver — the root of a tree broadcast started
    again while its children still forward the last one — waits. Off by default (eager sends).
    ``ready_notice_s``: what that notice takes to reach the sender, s (``None``: the path's
    α). It is a few bytes handled by gloo's I/O threads, no Python wake-up, so on a host it
    costs less than a ping-pong's α (:mod:`lab.calibrate` measures it: a receive posted late
    against one posted early).

    ``post_overhead_s``: the CPU time a rank spends posting one non-blocking send or receive,
    s (LogP's *o*, Culler et al. 1993): a rank's posts and local work run one after another,
    and a message leaves (or a receive is ready) only once posted. 0: free, as the α-β model
    has it.

    ``queued_weight_by_bytes``: with ``receiver_driven_sends``, what each byte of a *queued*
    send takes of the capacity of a link it shares with other messages, by message size,
    ``((bytes, weight), …)`` interpolated in log size (empty: 1, a byte);
    ``lone_queued_weight_by_bytes`` the same for a link it crosses alone (empty: 1 — a
    message alone moves at the rate the ping-pong, whose sends find their notice, was solved
    to). A send is queued when its receiver's
    notice had not come as its rank began to post it: gloo then parks it, and its I/O thread
    writes it when the notice comes (``pair.cc``: ``localPendingSend_``), in bursts as the
    socket drains, instead of the calling thread at once; on the lab's two cores such bytes
    cost more CPU, and the plain exchange, whose sends are all queued, moved 1 MiB and more
    about a fifth slower than the shift posted ahead (chapter 2, "A queued send weighs more");
    alone, a stream of queued messages one way moved 1 MiB and more a fifth to a third slower
    than the ping-pong (chapter 2, "A stream one way").
    """

    name: str
    devices: tuple[Device, ...]
    topology: Topology
    buffered_sends: bool = False
    send_buffer_bytes: float | None = None
    receiver_driven_sends: bool = False
    ready_notice_s: float | None = None
    post_overhead_s: float = 0.0
    queued_weight_by_bytes: tuple[tuple[float, float], ...] = ()
    lone_queued_weight_by_bytes: tuple[tuple[float, float], ...] = ()
    send_buffer_by_bytes: tuple[tuple[float, float], ...] = ()

    def send_buffer(self, nbytes: int) -> float | None:
        """The bytes of an ``nbytes`` message still unsent when its blocking send returns
        (:attr:`send_buffer_by_bytes`, else :attr:`send_buffer_bytes`; ``None``: all)."""
        table = self.send_buffer_by_bytes
        if table:
            return min(float(nbytes), log_interpolate(table, max(nbytes, 1)))
        return self.send_buffer_bytes

    def queued_weight(self, nbytes: int) -> float:
        """The weight of a queued send of ``nbytes`` on a shared link
        (:attr:`queued_weight_by_bytes`)."""
        table = self.queued_weight_by_bytes
        return log_interpolate(table, max(nbytes, 1)) if table else 1.0

    def lone_queued_weight(self, nbytes: int) -> float:
        """The weight of a queued send of ``nbytes`` on a link it crosses alone
        (:attr:`lone_queued_weight_by_bytes`)."""
        table = self.lone_queued_weight_by_bytes
        return log_interpolate(table, max(nbytes, 1)) if table else 1.0

    def __post_init__(self) -> None:
        if len(self.devices) != self.topology.world_size:
            raise ValueError(f"{len(self.devices)} devices for a "
                             f"{self.topology.world_size}-rank topology")

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return len(self.devices)

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
