"""The network: links, topologies, and how concurrent transfers share a link.

The α-β model (Hockney 1994) prices one message of ``n`` bytes on a link at

    T(n) = α + n / B

with α the latency (s) and B the bandwidth (bytes/s), i.e. β = 1/B s per byte. A
:class:`Link` carries α and B and is *full duplex*: each direction is its own channel, so a
send ``a -> b`` never slows a send ``b -> a``.

What the formula leaves out is **contention**: several transfers crossing one channel at once.
Each link chooses one of three models:

``none``
    Pure α-β. Every transfer sees the whole bandwidth, however many share the link. With
    ``none`` on a fully connected topology a simulation equals the textbook closed form.
``fifo``
    Transfers queue: one at a time crosses the channel at full bandwidth, in arrival order.
``fair``
    Processor sharing: transfers crossing a channel split its bandwidth. Across a multi-hop
    route the rates are the *max-min fair* allocation (progressive filling, Bertsekas &
    Gallager, *Data Networks*, §6.5.2), recomputed whenever a transfer starts or ends. Two
    equal transfers started together on one link each take 2n/B.

A :class:`Topology` is a graph of ranks (ints) and switches (strings) joined by links, with a
route for every rank pair; the builders make the usual shapes. :class:`Network` is the run-time
side used by one simulation: it moves bytes along routes and counts them per channel.

Read in this order: :mod:`~simulator.core.network.link` (α, B, contention),
:mod:`~simulator.core.network.host_hooks` (the host tier's corrections to a link),
:mod:`~simulator.core.network.topology` (graphs and routes),
:mod:`~simulator.core.network.runtime` (:class:`Network`, one simulation's transfers),
:mod:`~simulator.core.network.fair` (max-min fair rates, recomputed only where a change
reaches).
"""

from simulator.core.network.host_hooks import LinkEffects, log_interpolate
from simulator.core.network.link import (
    CONTENTION_MODELS,
    Channel,
    Contention,
    Link,
    Node,
)
from simulator.core.network.runtime import Network
from simulator.core.network.topology import (
    Router,
    Topology,
    UNLIMITED_Bps,
    connection_channel,
)

__all__ = [
    "CONTENTION_MODELS",
    "Channel",
    "Contention",
    "Link",
    "LinkEffects",
    "Network",
    "Node",
    "Router",
    "Topology",
    "UNLIMITED_Bps",
    "connection_channel",
    "log_interpolate",
]
