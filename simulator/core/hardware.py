"""Devices and clusters: what computes, and how it is wired.

A :class:`Device` is one rank's processor — a GPU, or a CPU process — with a compute rate,
memory bandwidth and capacity. A :class:`Cluster` is a list of devices plus a
:class:`~simulator.core.network.Topology`. Presets describe well-known machines from their
vendors' data sheets (``../shared/REFERENCES.md``); :meth:`Cluster.local` describes *this*
machine from its calibration file.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from simulator.core.calibration import (
    CalibrationEntry,
    exchange_flows,
    find_entry,
    fit_alpha_beta,
)
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
            to the bytes (:mod:`simulator.core.reduction`, :meth:`reduce_s`).
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

    @classmethod
    def from_calibration(cls, entry: CalibrationEntry, world_size: int | None = None,
                         contention: Contention = "fair", exchange_bus: bool = False,
                         receiver_driven: bool = False) -> Cluster:
        """The simulated twin of a calibrated machine: ranks as processes on one host.

        Each rank is a CPU process. Its rates are the ones measured with ``entry.world_size``
        ranks running at once, so contention for cores is already in them. Messages cross
        :meth:`Topology.shared_bus`: a port per rank (α and B of the ping-pong fit) and one
        bus shared by all messages (the aggregate bandwidth of concurrent exchanges). The bus
        is never slower than one message alone was measured to go, so it is at least B; a
        message that starts while others are in flight pays the exchanges' latency (never
        below α): on a shared host its process must first be scheduled again. Where the
        calibration measured the chain of dependent exchanges, that latency depends on how
        many messages are in flight (:func:`chain_latencies`).
        Without an exchange measurement the ranks are simply fully connected. An entry
        calibrated on a shaped network (``entry.network`` ``shaped:…``) gives
        :meth:`shaped`'s switch instead.

        ``exchange_bus`` (the collectives chapter's model; off: every other model as it was
        calibrated): the bus's rate for messages that share it is fitted to the concurrent
        exchanges of bandwidth-bound sizes only (:func:`exchange_bus_Bps`), even where that
        is below B, while a message alone on the bus still moves at B.
        ``receiver_driven``: sends wait for the receiver's receive-ready notice, as gloo's do
        (:attr:`receiver_driven_sends`; loopback only, off: eager sends as calibrated); the
        notice takes the calibrated ``ready_notice_s`` (α where it was not measured), and
        posting a send or a receive the calibrated ``post_overhead_s`` (gloo's host-side cost,
        measured with it). These are the collectives' loopback model, which also prices a
        busy message's latency by the chain posted the way the collectives post their steps —
        each receive one step ahead (``entry.chain_ahead_latency_s``, where measured) — with
        messages that start together all counting one another as in flight
        (:class:`Link`'s ``count_simultaneous``), and scales that table so that the simulated
        chain takes the measured time per step (:func:`simulator.core.wakeup.chain_means`). The
        chain between two ranks is a swap, and posted ahead its next notice queues behind its
        send on the connection both directions use; two messages in flight that are *not* a
        swap pay the plain chain's two-rank step instead (``one_way_pair_latency_s``). With
        ``exchange_bus`` the bus's rate by load is solved
        (:func:`simulator.core.bus.bus_rates`) from the ring's shift posted ahead where the
        calibration has it and sends are receiver-driven — posted as the collectives post,
        so that the notice is paid in the solve as often as in the collectives — else from the
        plain exchanges; and where the calibration also timed the swap posted ahead (three
        ranks or more), each pair's connection is priced from it
        (:func:`simulator.core.bus.connection_rates`). Solved from the shift, the model also
        weighs the bytes of *queued* sends — posted before their receiver's notice came, as
        every send of the plain exchange is — by what makes the simulated plain exchange take
        its measured time (:func:`simulator.core.bus.queued_weights`,
        :attr:`queued_weight_by_bytes`); bus, connections and weights are solved in turn
        :data:`QUEUED_ROUNDS` times, since the shift's first step is queued too. Where the
        calibration timed the shift whose received messages are reduced before each next
        send (``entry.reduce_ahead_times_s``), every reduction is priced by size as it costs
        among messages in flight, solved over that bus so that the simulated reducing shift
        takes its measured time (:func:`simulator.core.reduction.reduction_times`,
        :attr:`Device.reduce_s_by_bytes`). Before all
        that, this model's lone message — the latency of a message on an idle bus and each
        port's rate by load — is solved from the calibration's ping-pong so that the simulated
        ping-pong takes its measured time (:mod:`simulator.core.pingpong`): the fitted α
        already holds the posting and the notice that the model charges besides. Where the
        calibration timed the ping-pong's send returns (``entry.send_return_times_s``) a
        blocking send returns once the socket buffers hold what it has left, by size
        (:attr:`buffered_sends`, :func:`send_buffers`), so that the ping-pong's reply finds
        the notice of a receive posted while it was still arriving, as on the real host; and
        where it also timed the stream one way
        (``entry.stream_times_s``), whose sends never find one, a queued message alone on
        the bus is weighed so that the simulated stream takes its measured time
        (:func:`simulator.core.pingpong.stream_weights`,
        :attr:`lone_queued_weight_by_bytes`), solved in turn with the ping-pong's α and
        ports.
        """
        if entry.network != "loopback":
            return cls.shaped_from(entry, world_size, contention=contention)
        world_size = world_size or entry.world_size
        device = Device(
            name=f"{entry.host}-cpu", flops_per_s=entry.flops_per_s,
            mem_bandwidth_Bps=3 * entry.reduce_Bps, memory_bytes=math.inf,
            reduce_Bps=entry.reduce_Bps, memcpy_Bps=entry.memcpy_Bps)
        lone: dict[str, Any] = {"alpha": entry.latency_s, "ports": (),  # the ping-pong's
                                "stream": ()}  # and the stream's
        # the collectives' model: a blocking send returns once the socket buffers hold the rest
        buffer = (send_buffers(entry.p2p_sizes, entry.p2p_times_s, entry.send_return_times_s)
                  if exchange_bus and receiver_driven else ())
        buffered = bool(buffer)

        def build(chain: Sequence[float], pair: float | None = None,
                  by_load: Sequence[tuple[float, float]] = (),
                  connection: Sequence[tuple[float, float]] = (),
                  queued: Sequence[tuple[float, float]] = (), alpha: float | None = None,
                  ports: Sequence[tuple[float, float]] | None = None,
                  lone_queued: Sequence[tuple[float, float]] | None = None) -> Cluster:
            alpha = lone["alpha"] if alpha is None else alpha
            ports = lone["ports"] if ports is None else ports
            lone_queued = lone["stream"] if lone_queued is None else lone_queued
            link = Link(alpha, entry.bandwidth_Bps, contention)
            if entry.bus_bandwidth_Bps > 0:
                bus = max(entry.bus_bandwidth_Bps, entry.bandwidth_Bps,
                          *(rate for _, rate in ports))
                busy = max(entry.bus_latency_s, entry.latency_s) if entry.bus_latency_s else None
                shared = exchange_bus_Bps(entry) if exchange_bus else None
                topo = Topology.shared_bus(world_size, link, shared or bus,
                                           busy or entry.latency_s, chain,
                                           solo_bus_Bps=bus if shared else None,
                                           count_simultaneous=receiver_driven,
                                           one_way_pair_latency_s=pair, bus_by_load=by_load,
                                           connection_by_load=connection,
                                           port_by_load=ports)
            else:
                topo = Topology.fully_connected(world_size, link)
            return replace(cls.homogeneous(f"local-{entry.backend}x{world_size}", device, topo),
                           receiver_driven_sends=receiver_driven,
                           ready_notice_s=entry.ready_notice_s,
                           post_overhead_s=(entry.post_overhead_s or 0.0) if receiver_driven
                           else 0.0,
                           queued_weight_by_bytes=tuple(queued) if receiver_driven else (),
                           lone_queued_weight_by_bytes=(tuple(lone_queued) if receiver_driven
                                                        else ()),
                           buffered_sends=buffered, send_buffer_by_bytes=buffer)

        if (exchange_bus and receiver_driven and entry.bus_bandwidth_Bps > 0
                and len(entry.p2p_sizes) >= 2):  # the collectives' model: its own ping-pong
            from simulator.core.pingpong import idle_latency, port_rates, stream_weights

            sizes, times = entry.p2p_sizes, entry.p2p_times_s
            streamed = buffered and bool(entry.stream_times_s)
            for _ in range(PING_PONG_ROUNDS):
                lone["alpha"] = idle_latency(lambda a: build((), alpha=a), sizes, times,
                                             entry.latency_s, entry.bandwidth_Bps)
                lone["ports"] = port_rates(lambda t: build((), ports=t), sizes, times,
                                           entry.bandwidth_Bps)
                if streamed:  # a queued lone message (the ping-pong's first is one, too)
                    lone["stream"] = stream_weights(lambda t: build((), lone_queued=t),
                                                    entry.exchange_sizes, entry.stream_times_s)
        ahead = receiver_driven and bool(entry.chain_ahead_latency_s)
        chain = chain_latencies(entry, ahead=ahead)
        pair = None
        if receiver_driven and chain and entry.bus_bandwidth_Bps > 0:
            from simulator.core.wakeup import chain_means

            plain_pair = chain_latencies(entry)[:1]
            if ahead and plain_pair:  # two messages one way each: the plain chain's pair
                pair = chain_means(build, plain_pair, ahead=False)[0]
            chain = chain_means(lambda table: build(table, pair), chain, ahead)
        by_load: tuple[tuple[float, float], ...] = ()
        if (exchange_bus and entry.bus_bandwidth_Bps > 0 and entry.exchange_sizes
                and world_size == entry.world_size):  # the exchange as it was measured
            from simulator.core.bus import bus_rates, connection_rates, queued_weights
            from simulator.core.shaped import shift_flows

            ahead_times = entry.shift_ahead_times_s if receiver_driven else []
            flows = (shift_flows if ahead_times else exchange_flows)(entry.world_size)
            connection: tuple[tuple[float, float], ...] = ()
            queued: tuple[tuple[float, float], ...] = ()
            # queued sends are weighed by the plain exchange; the shift's first step has them
            # too: each round solves the bus and the connections with the last round's weights
            for _ in range(QUEUED_ROUNDS if ahead_times else 1):
                by_load = bus_rates(partial(build, chain, pair, queued=queued),
                                    entry.exchange_sizes, ahead_times or entry.exchange_times_s,
                                    flows, ahead=bool(ahead_times))
                if not (ahead_times and by_load):
                    break
                if entry.swap_ahead_times_s:
                    connection = connection_rates(
                        partial(build, chain, pair, by_load, queued=queued),
                        entry.exchange_sizes, entry.swap_ahead_times_s)
                queued = queued_weights(partial(build, chain, pair, by_load, connection),
                                        entry.exchange_sizes, entry.exchange_times_s)
            cluster = build(chain, pair, by_load, connection, queued)
            if ahead_times and entry.reduce_ahead_times_s and by_load:
                # a reduction among messages, solved over the bus just solved
                from simulator.core.reduction import reduction_times

                table = reduction_times(partial(_with_reductions, cluster),
                                        entry.exchange_sizes, ahead_times,
                                        entry.reduce_ahead_times_s, entry.reduce_Bps)
                cluster = _with_reductions(cluster, table)
            return cluster
        return build(chain, pair, by_load)

    @classmethod
    def local(cls, world_size: int, backend: str = "gloo", path: str | Path | None = None,
              host: str | None = None, exchange_bus: bool = False,
              receiver_driven: bool = False) -> Cluster:
        """This machine, from its calibration file (see :mod:`simulator.core.calibration`);
        ``exchange_bus`` and ``receiver_driven`` as in :meth:`from_calibration`."""
        return cls.from_calibration(find_entry(world_size, backend, host, path),
                                    exchange_bus=exchange_bus, receiver_driven=receiver_driven)

    @classmethod
    def shaped(cls, world_size: int, bandwidth: str | Sequence[str | int] = "1gbit",
               backend: str = "gloo", path: str | Path | None = None,
               host: str | None = None) -> Cluster:
        """This machine's ranks on the shaped network of :mod:`backends.shaped`.

        A switch with one port per rank, rank ``k``'s port as fast as its link shaped to
        ``bandwidth`` (one rate, or one per rank) carries payload; α, the links' efficiency
        and the ranks' rates come from the calibration made on that very network
        (``distml-lab calibrate --network shaped --bandwidth …``). See
        :mod:`simulator.core.shaped`.
        """
        from simulator.core.shaped import network_key, parse_bandwidths

        parse_bandwidths(bandwidth, world_size)  # one rate, or exactly one per rank
        entry = find_entry(world_size, backend, host, path, network_key("shaped", bandwidth))
        return cls.shaped_from(entry, world_size)

    @classmethod
    def shaped_from(cls, entry: CalibrationEntry, world_size: int | None = None,
                    bandwidth: str | Sequence[str | int] | None = None,
                    contention: Contention = "fair") -> Cluster:
        """The shaped switch priced by a shaped-network calibration ``entry``.

        Each port carries half the fitted α and η·R_k/8 bytes/s, η the payload efficiency of
        the calibrated rank 0 ↔ 1 link (:func:`simulator.core.shaped.port_links`), and the
        acknowledgements of what it receives as the calibration's concurrent shift measured
        them (:func:`simulator.core.shaped.ack_fraction`); a message among others in flight
        pays the shift's latency. A send returns once the rest fits in the socket send buffer
        the calibration measured (``entry.send_buffer_bytes``; not measured: at once). The rates
        R_k are the calibrated network's, or ``bandwidth``'s (what-if: other rates, the same
        framing).
        """
        from simulator.core.shaped import (
            ack_fraction,
            key_rates,
            parse_bandwidths,
            port_links,
            shaped_topology,
            spec_text,
        )

        world_size = world_size or entry.world_size
        calibrated = key_rates(entry.network)
        rates = parse_bandwidths(bandwidth if bandwidth is not None else calibrated,
                                 world_size)
        device = Device(
            name=f"{entry.host}-cpu", flops_per_s=entry.flops_per_s,
            mem_bandwidth_Bps=3 * entry.reduce_Bps, memory_bytes=math.inf,
            reduce_Bps=entry.reduce_Bps, memcpy_Bps=entry.memcpy_Bps)
        acks = ack_fraction(entry.bandwidth_Bps, entry.bus_bandwidth_Bps, entry.world_size,
                            calibrated)
        ports = port_links(entry.latency_s, entry.bandwidth_Bps, calibrated, rates, contention,
                           acks)
        return cls(f"shaped-{spec_text(rates)}x{world_size}", (device,) * world_size,
                   shaped_topology(ports, busy_latency_s=entry.bus_latency_s or None),
                   buffered_sends=True, send_buffer_bytes=entry.send_buffer_bytes)


def send_buffers(sizes: Sequence[int], one_way_s: Sequence[float],
                 return_s: Sequence[float]) -> tuple[tuple[float, float], ...]:
    """What a blocking send leaves unsent as it returns, by message size,
    ``((n, bytes), …)`` (:attr:`Cluster.send_buffer_by_bytes`): ``n·(1 − t_return/t)`` for
    each size of the ping-pong whose one-way time ``t`` and send return ``t_return`` (s)
    were measured — the share of its one-way time still to go when the sender was free.
    Empty when the returns were not measured."""
    if len(return_s) != len(sizes):
        return ()
    return tuple((float(n), n * min(1.0, max(0.0, 1.0 - ret / t)))
                 for n, t, ret in zip(sizes, one_way_s, return_s, strict=True)
                 if n > 0 and t > 0 and ret > 0)


PING_PONG_ROUNDS = 2
"""Rounds of solving the collectives' loopback model's idle α and port rates in turn from the
ping-pong (:mod:`simulator.core.pingpong`): each moves the other's sizes a little."""

QUEUED_ROUNDS = 3
"""Rounds of solving the collectives' loopback bus, connections and queued sends' weights in
turn (:meth:`Cluster.from_calibration`): the weights, solved from the plain exchange, also
price the first step of the shift the bus is solved from."""

EXCHANGE_BUS_BYTES = (2**20, 2**24)
"""Message sizes (bytes, inclusive) of the concurrent exchanges :func:`exchange_bus_Bps` fits:
from 1 MiB, where a message's time is mostly its bytes, to 16 MiB, the largest message of the
collectives' accuracy sweep. Below 1 MiB an exchange is latency — and, on a host whose vCPUs
sometimes wait a scheduler tick, a lottery of 4 ms waits (64–256 KiB measured 0.4–1.1 ms) that
would bend a fit over all sizes into a bus faster than any large exchange ran."""


def exchange_bus_Bps(entry: CalibrationEntry) -> float | None:
    """The aggregate rate of messages sharing a loopback host, bytes/s: ``t = a + f·n/bus``
    fitted (:func:`~simulator.core.calibration.fit_alpha_beta`: least squares on relative
    errors, ``a ≥ 0``) to the calibration's concurrent exchanges of :data:`EXCHANGE_BUS_BYTES`
    sizes, ``f`` messages in flight (both directions of each pair). ``None`` with fewer than
    two such sizes or no positive slope.
    """
    lo, hi = EXCHANGE_BUS_BYTES
    flows = exchange_flows(entry.world_size)
    points = [(flows * n, t) for n, t in zip(entry.exchange_sizes, entry.exchange_times_s,
                                            strict=True) if lo <= n <= hi and t > 0]
    if len(points) < 2:
        return None
    try:
        return fit_alpha_beta(*zip(*points, strict=True)).bandwidth_Bps
    except ValueError:  # no positive slope
        return None


def chain_latencies(entry: CalibrationEntry, ahead: bool = False) -> tuple[float, ...]:
    """α of a message that starts while ``k`` others are in flight (entry ``k − 1``), s.

    ``k + 1`` messages in flight at once are a step of the calibration's chain of dependent
    exchanges among ``k + 1`` ranks (``entry.chain_latency_s``); never below the idle α.
    ``ahead``: the chain posted as the collectives post their steps, each receive one step
    ahead (``entry.chain_ahead_latency_s``).
    Empty when the entry has no chain measurement (a what-if that wants every busy message to
    pay one latency clears the chains and sets ``bus_latency_s``).
    """
    chain = entry.chain_ahead_latency_s if ahead else entry.chain_latency_s
    return tuple(max(t, entry.latency_s) for t in chain)


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


def preset(name: str, world_size: int, calibration: str | Path | None = None,
           backend: str = "gloo") -> Cluster:
    """A cluster by name: a key of :data:`PRESETS`, or ``local`` (from calibration)."""
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    if name == "local":
        return Cluster.local(world_size, backend, calibration)
    if name not in PRESETS:
        raise ValueError(f"unknown cluster {name!r}; choose local or one of "
                         f"{', '.join(sorted(PRESETS))}")
    return PRESETS[name][1](world_size)


def _with_reductions(cluster: Cluster, table: Sequence[tuple[float, float]]) -> Cluster:
    """``cluster`` whose every device reduces as ``table`` says (``Device.reduce_s_by_bytes``)."""
    return replace(cluster, devices=tuple(replace(d, reduce_s_by_bytes=tuple(table))
                                          for d in cluster.devices))
