"""A link's host effects: the host tier's hook on a :class:`~simulator.core.network.Link`.

The textbook's link is α, B and a contention model. Ranks that are processes on one host, or
TCP streams through a shaped switch, do more than that: a message that starts while others are
in flight waits to be scheduled, one message alone moves at another rate than several, the
rate depends on how many bytes are in flight, acknowledgements ride the other direction.
:class:`LinkEffects` holds those corrections for one link, as :attr:`Link.host`; in the
textbook tier ``Link.host`` is ``None`` and the network prices every message at α + n/B with
the link's contention model alone.

The host tier sets these fields — :mod:`simulator.host`, through the builders that take them as
arguments (:meth:`~simulator.core.network.Topology.shared_bus`, the shaped switch of
:mod:`simulator.core.shaped`); the run time (:mod:`simulator.core.network.runtime`) reads them.
Each field is named, with the effect that sets it, in :data:`simulator.host.effects.HOST_EFFECTS`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LinkEffects:
    """The host effects on one link; every default leaves the textbook link as it is.

    Attributes:
        busy_latency_s: α for a message that starts while the link already carries another
            one, s (``None``: always the link's ``latency_s``). On a host whose ranks share
            cores, a message that arrives while other copies are in progress waits for its
            process to be scheduled again: its latency is a scheduling delay, not the idle α.
        busy_latency_by_flows: the same by how many messages are in flight when it starts:
            entry ``k − 1`` with ``k`` others in flight (the last entry for more), s; empty:
            ``busy_latency_s`` whatever their number. On a host of ``c`` cores the delay grows
            with the number of ranks that are runnable at once (:mod:`lab.calibrate`'s chain
            of dependent exchanges among ``k`` ranks measures it).
        count_simultaneous: with a busy latency, messages that start at the same instant count
            one another as in flight (each pays the entry for all the others) instead of in
            whatever order the simulation happens to start them (the first none, the second
            one, …). Where ranks post a step together, as a collective's do, none of them is
            the first; counted in order, the ranks whose messages came first run ahead of the
            others step after step, and fewer messages are in flight than on the real host.
        one_way_pair_latency_s: with a table, the busy latency of a message that starts with
            exactly one other in flight when that other is not its reverse — two messages one
            way each, not a swap — s (``None``: the table's first entry, whatever the other).
            The table's first entry is measured by a chain between two ranks, which is a swap.
        solo_bandwidth_Bps: B in each direction while a single transfer crosses the channel,
            bytes/s (``None``: always the link's ``bandwidth_Bps``). Counted by ``fair``
            sharing only. A host's loopback "bus" moves one message at the rate a ping-pong
            measures but several at once at the aggregate rate concurrent exchanges measure,
            which may be lower: each byte is copied by the CPUs at both ends, and two messages
            each way keep both cores busy with four copies.
        bandwidth_by_load: the channel's aggregate rate by the bytes of the messages it
            carries at once, ``((load_bytes, Bps), …)`` by increasing load, interpolated
            log-linearly between points and flat beyond the ends (empty: the link's
            ``bandwidth_Bps`` whatever the load). Counted by ``fair`` sharing only, and only
            while it carries two or more messages (one alone moves at ``solo_bandwidth_Bps``).
            A host's loopback copies messages through its caches: two 512 KiB messages
            crossing at once move their bytes about two and a half times as fast as two 8 MiB
            ones, whose copies run at the speed of memory.
        ack_fraction: bytes a transfer crossing this link in one direction puts on the
            *other* direction per byte it carries (TCP's acknowledgements), in units of the
            link's bandwidth; 0 leaves the directions independent. Counted by ``fair`` sharing
            only: a port that sends while it receives carries its own data plus the
            acknowledgements of what it receives.
    """

    busy_latency_s: float | None = None
    busy_latency_by_flows: tuple[float, ...] = ()
    count_simultaneous: bool = False
    one_way_pair_latency_s: float | None = None
    solo_bandwidth_Bps: float | None = None
    bandwidth_by_load: tuple[tuple[float, float], ...] = ()
    ack_fraction: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.ack_fraction < 1.0:
            raise ValueError(f"ack_fraction must be in [0, 1), got {self.ack_fraction}")
        if self.solo_bandwidth_Bps is not None and not self.solo_bandwidth_Bps > 0:
            raise ValueError(f"solo bandwidth must be > 0 bytes/s, got {self.solo_bandwidth_Bps}")
        loads = [load for load, _ in self.bandwidth_by_load]
        if any(not (load > 0 and rate > 0) for load, rate in self.bandwidth_by_load) or (
                loads != sorted(set(loads))):
            raise ValueError("bandwidth_by_load needs positive loads, increasing, with positive "
                             f"rates; got {self.bandwidth_by_load}")

    def rate_at_load(self, load_bytes: float) -> float:
        """The aggregate rate while messages totalling ``load_bytes`` cross, bytes/s (read from
        :attr:`bandwidth_by_load`, which must not be empty)."""
        return log_interpolate(self.bandwidth_by_load, load_bytes)


def log_interpolate(table: Sequence[tuple[float, float]], x: float) -> float:
    """The value at ``x`` of a table ``((x, y), …)`` by increasing ``x`` > 0: linear in
    log ``x`` between its points, flat beyond its ends (the host tier's tables by size)."""
    if x <= table[0][0]:
        return table[0][1]
    for (lo, a), (hi, b) in itertools.pairwise(table):
        if x <= hi:
            return a + (b - a) * math.log(x / lo) / math.log(hi / lo)
    return table[-1][1]
