"""The simulated twin of *this* machine: a :class:`~simulator.core.hardware.Cluster` built from a
calibration entry (:mod:`simulator.core.calibration`).

The textbook's cluster (:mod:`simulator.core.hardware`) needs α, bandwidth, contention, FLOP/s
and memory; a preset fills them from data sheets. This module fills them from what the
calibration measured on the reader's host — and, for the collectives' loopback model, solves
the host effects the calibration measured (the ping-pong's idle latency and ports, the chain,
the bus by load, queued sends, reductions among messages) by simulating the very primitives
that measured them (:mod:`~simulator.host.pingpong`, :mod:`~simulator.host.wakeup`,
:mod:`~simulator.host.bus`, :mod:`~simulator.host.reduction`). Each effect has a name
(:mod:`~simulator.host.effects`) and can be left out, down to none: the textbook tier. An entry
calibrated on a shaped network gives that network's switch (:mod:`~simulator.host.shaped`).
It sits above :mod:`simulator.core`, which imports nothing from here.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from simulator.core.calibration import (
    CalibrationEntry,
    exchange_flows,
    find_entry,
    fit_alpha_beta,
)
from simulator.core.cluster_file import resolve as resolve_cluster
from simulator.core.hardware import PRESETS, Cluster, Device
from simulator.core.network import Contention, Link, Topology
from simulator.host.effects import resolve, switch_effects
from simulator.host.shaped import shaped_cluster_from_entry


def cluster_from_entry(entry: CalibrationEntry, world_size: int | None = None,
                       contention: Contention = "fair", exchange_bus: bool = False,
                       receiver_driven: bool = False,
                       effects: Collection[str] | None = None) -> Cluster:
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
    (:attr:`ClusterEffects.receiver_driven_sends`; loopback only, off: eager sends as
    calibrated); the notice takes the calibrated ``ready_notice_s`` (α where it was not
    measured), and posting a send or a receive the calibrated ``post_overhead_s`` (gloo's
    host-side cost, measured with it). These are the collectives' loopback model, which
    also prices a busy message's latency by the chain posted the way the collectives post
    their steps — each receive one step ahead (``entry.chain_ahead_latency_s``, where
    measured) — with messages that start together all counting one another as in flight
    (:class:`LinkEffects`' ``count_simultaneous``), and scales that table so that the
    simulated chain takes the measured time per step
    (:func:`simulator.host.wakeup.chain_means`). The chain between two ranks is a swap, and
    posted ahead its next notice queues behind its send on the connection both directions
    use; two messages in flight that are *not* a swap pay the plain chain's two-rank step
    instead (``one_way_pair_latency_s``). With ``exchange_bus`` the bus's rate by load is
    solved (:func:`simulator.host.bus.bus_rates`) from the ring's shift posted ahead where the
    calibration has it and sends are receiver-driven — posted as the collectives post,
    so that the notice is paid in the solve as often as in the collectives — else from the
    plain exchanges; and where the calibration also timed the swap posted ahead (three
    ranks or more), each pair's connection is priced from it
    (:func:`simulator.host.bus.connection_rates`). Solved from the shift, the model also
    weighs the bytes of *queued* sends — posted before their receiver's notice came, as
    every send of the plain exchange is — by what makes the simulated plain exchange take
    its measured time (:func:`simulator.host.bus.queued_weights`,
    :attr:`ClusterEffects.queued_weight_by_bytes`); bus, connections and weights are solved
    in turn :data:`QUEUED_ROUNDS` times, since the shift's first step is queued too. Where the
    calibration timed the shift whose received messages are reduced before each next
    send (``entry.reduce_ahead_times_s``), every reduction is priced by size as it costs
    among messages in flight, solved over that bus so that the simulated reducing shift
    takes its measured time (:func:`simulator.host.reduction.reduction_times`,
    :attr:`ClusterEffects.reduce_s_by_bytes`). Before all
    that, this model's lone message — the latency of a message on an idle bus and each
    port's rate by load — is solved from the calibration's ping-pong so that the simulated
    ping-pong takes its measured time (:mod:`simulator.host.pingpong`): the fitted α
    already holds the posting and the notice that the model charges besides. Where the
    calibration timed the ping-pong's send returns (``entry.send_return_times_s``) a
    blocking send returns once the socket buffers hold what it has left, by size
    (:attr:`ClusterEffects.buffered_sends`, :func:`send_buffers`), so that the ping-pong's
    reply finds the notice of a receive posted while it was still arriving, as on the real host; and
    where it also timed the stream one way
    (``entry.stream_times_s``), whose sends never find one, a queued message alone on
    the bus is weighed so that the simulated stream takes its measured time
    (:func:`simulator.host.pingpong.stream_weights`,
    :attr:`ClusterEffects.lone_queued_weight_by_bytes`), solved in turn with the
    ping-pong's α and ports. The cluster-wide effects go in :attr:`Cluster.host`
    (:class:`~simulator.core.host_hooks.ClusterEffects`), the links' in each
    :attr:`Link.host` (:class:`~simulator.core.network.LinkEffects`).

    ``effects``: the host effects to apply, by name (:data:`~simulator.host.effects.HOST_EFFECTS`;
    each one's requirements among them, else ``ValueError``) instead of the two switches,
    which then stay off; ``None``: those the switches stand for
    (:func:`~simulator.host.effects.switch_effects`). None of them gives the textbook tier
    (:func:`simulator.host.factory.textbook_cluster`), all of them the collectives' model.
    """
    if entry.network != "loopback":
        return shaped_cluster_from_entry(entry, world_size, contention=contention)
    if effects is not None and (exchange_bus or receiver_driven):
        raise ValueError("give the host effects or the exchange_bus/receiver_driven "
                         "switches, not both")
    on = resolve(effects) if effects is not None else switch_effects(exchange_bus,
                                                                      receiver_driven)
    driven = "receiver_driven" in on
    world_size = world_size or entry.world_size
    device = Device(
        name=f"{entry.host}-cpu", flops_per_s=entry.flops_per_s,
        mem_bandwidth_Bps=3 * entry.reduce_Bps, memory_bytes=math.inf,
        reduce_Bps=entry.reduce_Bps, memcpy_Bps=entry.memcpy_Bps)
    lone: dict[str, Any] = {"alpha": entry.latency_s, "ports": (),  # the ping-pong's
                            "stream": ()}  # and the stream's
    # a blocking send returns once the socket buffers hold the rest
    buffer = (send_buffers(entry.p2p_sizes, entry.p2p_times_s, entry.send_return_times_s)
              if "send_buffers" in on else ())
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
            busy = (max(entry.bus_latency_s, entry.latency_s)
                    if entry.bus_latency_s and "busy_latency" in on else None)
            shared = exchange_bus_Bps(entry) if "exchange_bus" in on else None
            topo = Topology.shared_bus(world_size, link, shared or bus,
                                       busy or entry.latency_s, chain,
                                       solo_bus_Bps=bus if shared else None,
                                       count_simultaneous=driven,
                                       one_way_pair_latency_s=pair, bus_by_load=by_load,
                                       connection_by_load=connection,
                                       port_by_load=ports)
        else:
            topo = Topology.fully_connected(world_size, link)
        cluster = Cluster.homogeneous(f"local-{entry.backend}x{world_size}", device, topo)
        return cluster.with_host(
            receiver_driven_sends=driven,
            ready_notice_s=entry.ready_notice_s if driven else None,
            post_overhead_s=(entry.post_overhead_s or 0.0) if "post_overhead" in on else 0.0,
            queued_weight_by_bytes=tuple(queued) if driven else (),
            lone_queued_weight_by_bytes=tuple(lone_queued) if driven else (),
            buffered_sends=buffered, send_buffer_by_bytes=buffer)

    streamed = "lone_stream" in on and buffered and bool(entry.stream_times_s)
    if ((streamed or on & {"idle_latency", "port_rates"}) and entry.bus_bandwidth_Bps > 0
            and len(entry.p2p_sizes) >= 2):  # a lone message: solved from the ping-pong
        from simulator.host.pingpong import idle_latency, port_rates, stream_weights

        sizes, times = entry.p2p_sizes, entry.p2p_times_s
        for _ in range(PING_PONG_ROUNDS):
            if "idle_latency" in on:
                lone["alpha"] = idle_latency(lambda a: build((), alpha=a), sizes, times,
                                             entry.latency_s, entry.bandwidth_Bps)
            if "port_rates" in on:
                lone["ports"] = port_rates(lambda t: build((), ports=t), sizes, times,
                                           entry.bandwidth_Bps)
            if streamed:  # a queued lone message (the ping-pong's first is one, too)
                lone["stream"] = stream_weights(lambda t: build((), lone_queued=t),
                                                entry.exchange_sizes, entry.stream_times_s)
    ahead = driven and bool(entry.chain_ahead_latency_s)
    chain = chain_latencies(entry, ahead=ahead) if "wakeup_chain" in on else ()
    pair = None
    if driven and chain and entry.bus_bandwidth_Bps > 0:
        from simulator.host.wakeup import chain_means

        plain_pair = chain_latencies(entry)[:1]
        if ahead and plain_pair:  # two messages one way each: the plain chain's pair
            pair = chain_means(build, plain_pair, ahead=False)[0]
        chain = chain_means(lambda table: build(table, pair), chain, ahead)
    by_load: tuple[tuple[float, float], ...] = ()
    if ("bus_by_load" in on and entry.bus_bandwidth_Bps > 0 and entry.exchange_sizes
            and world_size == entry.world_size):  # the exchange as it was measured
        from simulator.core.shaped import shift_flows
        from simulator.host.bus import bus_rates, connection_rates, queued_weights

        ahead_times = entry.shift_ahead_times_s if driven else []
        flows = (shift_flows if ahead_times else exchange_flows)(entry.world_size)
        connection: tuple[tuple[float, float], ...] = ()
        queued: tuple[tuple[float, float], ...] = ()
        # queued sends are weighed by the plain exchange; the shift's first step has them
        # too: each round solves the bus and the connections with the last round's weights
        weighed = bool(ahead_times) and "queued_weight" in on
        for _ in range(QUEUED_ROUNDS if weighed else 1):
            by_load = bus_rates(partial(build, chain, pair, queued=queued),
                                entry.exchange_sizes, ahead_times or entry.exchange_times_s,
                                flows, ahead=bool(ahead_times))
            if not (ahead_times and by_load):
                break
            if entry.swap_ahead_times_s and "connections" in on:
                connection = connection_rates(
                    partial(build, chain, pair, by_load, queued=queued),
                    entry.exchange_sizes, entry.swap_ahead_times_s)
            if weighed:
                queued = queued_weights(partial(build, chain, pair, by_load, connection),
                                        entry.exchange_sizes, entry.exchange_times_s)
        cluster = build(chain, pair, by_load, connection, queued)
        if (ahead_times and entry.reduce_ahead_times_s and by_load
                and "reduction_among_messages" in on):
            # a reduction among messages, solved over the bus just solved
            from simulator.host.reduction import reduction_times

            table = reduction_times(partial(with_reductions, cluster),
                                    entry.exchange_sizes, ahead_times,
                                    entry.reduce_ahead_times_s, entry.reduce_Bps)
            cluster = with_reductions(cluster, table)
        return cluster
    return build(chain, pair, by_load)

def local_host_cluster(world_size: int, backend: str = "gloo", path: str | Path | None = None,
          host: str | None = None, exchange_bus: bool = False,
          receiver_driven: bool = False) -> Cluster:
    """This machine, from its calibration file (see :mod:`simulator.core.calibration`);
    ``exchange_bus`` and ``receiver_driven`` as in :meth:`from_calibration`."""
    return cluster_from_entry(find_entry(world_size, backend, host, path),
                                exchange_bus=exchange_bus, receiver_driven=receiver_driven)

def send_buffers(sizes: Sequence[int], one_way_s: Sequence[float],
                 return_s: Sequence[float]) -> tuple[tuple[float, float], ...]:
    """What a blocking send leaves unsent as it returns, by message size,
    ``((n, bytes), …)`` (:attr:`ClusterEffects.send_buffer_by_bytes`):
    ``n·(1 − t_return/t)`` for each size of the ping-pong whose one-way time ``t`` and send
    return ``t_return`` (s) were measured — the share of its one-way time still to go when
    the sender was free. Empty when the returns were not measured."""
    if len(return_s) != len(sizes):
        return ()
    return tuple((float(n), n * min(1.0, max(0.0, 1.0 - ret / t)))
                 for n, t, ret in zip(sizes, one_way_s, return_s, strict=True)
                 if n > 0 and t > 0 and ret > 0)


PING_PONG_ROUNDS = 2
"""Rounds of solving the collectives' loopback model's idle α and port rates in turn from the
ping-pong (:mod:`simulator.host.pingpong`): each moves the other's sizes a little."""

QUEUED_ROUNDS = 3
"""Rounds of solving the collectives' loopback bus, connections and queued sends' weights in
turn (:func:`~simulator.host.cluster_from_entry`): the weights, solved from the plain exchange, also
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


def with_reductions(cluster: Cluster, table: Sequence[tuple[float, float]]) -> Cluster:
    """``cluster`` whose every rank reduces as ``table`` says
    (:attr:`~simulator.core.host_hooks.ClusterEffects.reduce_s_by_bytes`)."""
    return cluster.with_host(reduce_s_by_bytes=tuple(table))


def preset(name: str, world_size: int, calibration: str | Path | None = None,
           backend: str = "gloo") -> Cluster:
    """A cluster by name: ``local`` (this machine, from its calibration) or a key of
    :data:`~simulator.core.hardware.PRESETS`."""
    if name == "local":
        if world_size < 1:
            raise ValueError(f"world size must be at least 1, got {world_size}")
        return local_host_cluster(world_size, backend, calibration)
    return resolve_cluster(name, world_size)  # a preset, or a cluster file (.json)


__all__ = ["PRESETS", "chain_latencies", "cluster_from_entry", "exchange_bus_Bps",
           "local_host_cluster", "preset", "send_buffers", "with_reductions"]
