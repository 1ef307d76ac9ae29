"""The host effects: what one real host does that the textbook's α-β-γ model misses, by name.

The textbook tier (:func:`simulator.host.factory.textbook_cluster`) prices a message at
α + n/B, lets concurrent messages share one bus, and reduces at γ. Ranks that are processes on
one host — gloo over loopback, more runnable threads than cores — do more than that, and the
host tier (:func:`simulator.host.cluster_from_entry`) layers each such *effect* on the textbook
tier as a named correction. Every effect here names

* the real rank code that measures it (``primitive``, in :mod:`backends`) — run by
  ``distml-lab calibrate`` (:mod:`lab.calibrate`);
* the simulator function that solves it from that measurement, so that the simulated primitive
  takes its measured time (``program``) — or the field it sets where nothing is solved;
* the calibration fields it reads (``fields``, of :class:`CalibrationEntry`) and the model
  fields it sets (``applies``: ``Class.field`` of :class:`~simulator.core.network.Link` or
  :class:`~simulator.core.network.Topology` — a textbook field it re-solves — or
  ``Class.host.field``, a field of the host tier's records :class:`Cluster.host
  <simulator.core.host_hooks.ClusterEffects>` and :class:`Link.host
  <simulator.core.network.LinkEffects>`, which the textbook tier leaves ``None``);
* the effects it is solved on top of (``requires``).

:data:`HOST_EFFECTS` lists them in teaching order, each after the ones it requires; any subset
closed under ``requires`` builds a cluster (:func:`resolve`), which is how
``benchmarks/host_effects.py`` measures what each one is worth.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class HostEffect:
    """One named correction of the host tier (see the module's docstring for each field)."""

    name: str
    summary: str
    primitive: str
    program: str
    fields: tuple[str, ...]
    applies: tuple[str, ...]
    requires: tuple[str, ...] = ()


_EFFECTS = (
    HostEffect(
        "busy_latency",
        "A message that starts while others are in flight waits longer than α: on a host "
        "with fewer cores than busy threads its sender must first be scheduled again.",
        "backends.primitives.pair_exchange", "simulator.core.network.LinkEffects.busy_latency_s",
        ("bus_latency_s",), ("Link.host.busy_latency_s",)),
    HostEffect(
        "wakeup_chain",
        "That wait grows with the number of messages in flight — each woken rank queues for a "
        "core — priced by the chain of dependent exchanges among 2, 3, … ranks.",
        "backends.primitives.chain_ahead", "simulator.host.wakeup.chain_means",
        ("chain_latency_s", "chain_ahead_latency_s"),
        ("Link.host.busy_latency_by_flows", "Link.host.one_way_pair_latency_s"), ("busy_latency",)),
    HostEffect(
        "exchange_bus",
        "Messages sharing the host move at the rate that bandwidth-bound concurrent exchanges "
        "reached, which can be below one lone message's B: the copies share memory.",
        "backends.primitives.pair_exchange", "simulator.host.cluster.exchange_bus_Bps",
        ("exchange_sizes", "exchange_times_s"),
        ("Link.bandwidth_Bps", "Link.host.solo_bandwidth_Bps")),
    HostEffect(
        "bus_by_load",
        "The shared bus is faster while the bytes in flight fit in the caches than once they "
        "spill to memory, so its rate is solved by load from the ring's shift.",
        "backends.primitives.shift_ahead", "simulator.host.bus.bus_rates",
        ("exchange_sizes", "exchange_times_s", "shift_ahead_times_s"),
        ("Link.host.bandwidth_by_load",), ("exchange_bus",)),
    HostEffect(
        "receiver_driven",
        "Gloo writes a send's bytes only once the receiver's receive-ready notice has come, so "
        "a send posted before its receive waits for that notice.",
        "backends.primitives.ready_notice_step",
        "simulator.core.host_hooks.ClusterEffects.receiver_driven_sends", ("ready_notice_s",),
        ("Cluster.host.receiver_driven_sends", "Cluster.host.ready_notice_s",
         "Link.host.count_simultaneous")),
    HostEffect(
        "post_overhead",
        "Posting a send or a receive costs the rank CPU time (LogP's o), and a message leaves "
        "only once posted.",
        "backends.primitives.post_pair",
        "simulator.core.host_hooks.ClusterEffects.post_overhead_s", ("post_overhead_s",),
        ("Cluster.host.post_overhead_s",)),
    HostEffect(
        "connections",
        "A pair of ranks shares one TCP connection both ways, so a swap's two messages move "
        "slower than a ring's, each of which has a connection to itself.",
        "backends.primitives.swap_ahead", "simulator.host.bus.connection_rates",
        ("exchange_sizes", "swap_ahead_times_s"), ("Topology.links",),
        ("bus_by_load", "receiver_driven")),
    HostEffect(
        "queued_weight",
        "A send posted before its receiver's notice is parked and written later by gloo's I/O "
        "thread, in bursts, so its bytes weigh more on the bus than a direct send's.",
        "backends.primitives.pair_exchange", "simulator.host.bus.queued_weights",
        ("exchange_sizes", "exchange_times_s"), ("Cluster.host.queued_weight_by_bytes",),
        ("bus_by_load", "receiver_driven")),
    HostEffect(
        "idle_latency",
        "The fitted α already holds the posting and the notice that the host tier charges "
        "besides, so a lone message's latency is solved anew: the simulated ping-pong of "
        "small messages must take its measured time.",
        "backends.collectives.point_to_point.ping_pong", "simulator.host.pingpong.idle_latency",
        ("p2p_sizes", "p2p_times_s"), ("Link.latency_s",)),
    HostEffect(
        "port_rates",
        "A straight line α + n/B bends at both ends of the ping-pong sweep, so each rank's port "
        "gets a rate by message size that makes the simulated ping-pong take its measured time.",
        "backends.collectives.point_to_point.ping_pong", "simulator.host.pingpong.port_rates",
        ("p2p_sizes", "p2p_times_s"), ("Link.host.bandwidth_by_load",)),
    HostEffect(
        "send_buffers",
        "A blocking send returns once the socket buffers hold what it has left to send, before "
        "the message has arrived, so its rank can post the next receive early.",
        "backends.collectives.point_to_point.ping_pong", "simulator.host.cluster.send_buffers",
        ("p2p_sizes", "p2p_times_s", "send_return_times_s"),
        ("Cluster.host.buffered_sends", "Cluster.host.send_buffer_by_bytes")),
    HostEffect(
        "lone_stream",
        "A stream of sends one way never finds the receiver's notice waiting, so even a lone "
        "message is parked and weighed like a queued one, solved from the stream's time.",
        "backends.collectives.point_to_point.stream", "simulator.host.pingpong.stream_weights",
        ("exchange_sizes", "stream_times_s"), ("Cluster.host.lone_queued_weight_by_bytes",),
        ("send_buffers", "receiver_driven")),
    HostEffect(
        "reduction_among_messages",
        "A reduction between a ring's steps costs far more than γ says — its memory traffic "
        "competes with the messages' copies — so it is priced by size from a reducing shift.",
        "backends.primitives.reduce_ahead", "simulator.host.reduction.reduction_times",
        ("exchange_sizes", "shift_ahead_times_s", "reduce_ahead_times_s", "reduce_Bps"),
        ("Cluster.host.reduce_s_by_bytes",), ("bus_by_load", "receiver_driven")),
)

HOST_EFFECTS: dict[str, HostEffect] = {effect.name: effect for effect in _EFFECTS}
"""Every host effect by name, in teaching order (each after the effects it requires)."""


HOST_TIER: frozenset[str] = frozenset(HOST_EFFECTS) - {"busy_latency", "wakeup_chain",
                                                        "port_rates"}
"""The effects the host tier applies by default (:func:`simulator.host.factory.local_cluster`):
those the collectives' accuracy benchmark (``benchmarks/host_effects.py``; its table in
``benchmarks/README.md``) shows pay. Leaving out the busy latency, its chain of wake-ups and the
ports' rates by size together did not make the median error worse over three independent runs
(each its own calibration), so they stay out; the rest together are worth a few points
(leaving out more of them made it worse). The three stay in the registry: the ablation measures
them, and chapters whose messages meet a busy host (the parameter server, ZeRO, Horovod's
negotiation) still price the busy latency (:func:`switch_effects`)."""


def resolve(names: Collection[str]) -> frozenset[str]:
    """``names`` as a set of host effects: ``ValueError`` for a name not in
    :data:`HOST_EFFECTS` (naming the known ones) or for an effect whose requirement is not
    among ``names``."""
    if isinstance(names, str):
        raise ValueError(f"host effects are a collection of names, got the string {names!r}")
    chosen = frozenset(names)
    unknown = sorted(chosen - HOST_EFFECTS.keys())
    if unknown:
        raise ValueError(f"unknown host effects {', '.join(unknown)}; "
                         f"known: {', '.join(HOST_EFFECTS)}")
    for name in HOST_EFFECTS:
        missing = [r for r in HOST_EFFECTS[name].requires if r not in chosen]
        if name in chosen and missing:
            raise ValueError(f"host effect {name} requires {', '.join(missing)}")
    return chosen


def without(name: str, effects: Collection[str] | None = None) -> frozenset[str]:
    """``effects`` (default: all) less ``name`` and every effect that requires it, directly
    or through another: the ablation of ``name``."""
    dropped = {name}
    for effect in HOST_EFFECTS.values():  # teaching order: requirements come first
        if dropped & set(effect.requires):
            dropped.add(effect.name)
    return resolve(set(HOST_EFFECTS if effects is None else effects) - dropped)


def switch_effects(exchange_bus: bool, receiver_driven: bool) -> frozenset[str]:
    """The effects that :func:`simulator.host.cluster_from_entry`'s two switches stand for:
    the busy latency and its chain always; the exchange bus and its rate by load with
    ``exchange_bus``; gloo's receiver-driven sends and the posting overhead with
    ``receiver_driven``; with both — the collectives' loopback model — every effect."""
    if exchange_bus and receiver_driven:
        return frozenset(HOST_EFFECTS)
    chosen = {"busy_latency", "wakeup_chain"}
    if exchange_bus:
        chosen |= {"exchange_bus", "bus_by_load"}
    if receiver_driven:
        chosen |= {"receiver_driven", "post_overhead"}
    return frozenset(chosen)


BUSY_HOST: frozenset[str] = switch_effects(False, False)
"""The host tier of the chapters after the collectives: the busy latency and its chain of
wake-ups only (what :func:`simulator.host.cluster_from_entry` applies with its switches off),
each message moving at the ping-pong's B over the calibrated bus, sends eager.

Used by :func:`simulator.host.factory.local_cluster` for every chapter's cluster but the
collectives' (whose host tier is :data:`HOST_TIER`): data parallelism and DDP
(:func:`lab.ddp.gloo_ring_cluster`), Horovod (:mod:`lab.horovod_predict`,
:mod:`lab.horovod_simulate`), the pipelines (:func:`lab.pipeline.local_cluster`), tensor
parallelism (:func:`lab.tensor_parallel.waiting_cluster`), ZeRO (:func:`lab.zero.predict_step`)
and the parameter server (:func:`lab.parameter_server.prediction.predict`). Why: their
models were built, and their predictions checked against measured steps, on this cluster —
their messages meet a host kept busy by compute and other ranks' threads, where the busy
latency is what a message pays, and the collectives' effects (the exchange bus, gloo's
receiver-driven sends, …) were solved for collectives running alone on an idle host."""
