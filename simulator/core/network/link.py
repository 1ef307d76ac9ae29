"""A link of the α-β model and its contention models (:mod:`simulator.core.network`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Contention = Literal["none", "fifo", "fair"]
CONTENTION_MODELS: tuple[str, ...] = ("none", "fifo", "fair")
Node = int | str
Channel = tuple[Node, Node]
"""A link in one direction, ``(from, to)``."""


@dataclass(frozen=True)
class Link:
    """A full-duplex link.

    Attributes:
        latency_s: α, the time before the first byte arrives, s.
        bandwidth_Bps: B, bytes per second in each direction.
        contention: ``none``, ``fifo`` or ``fair`` (see the module docstring).
        busy_latency_s: α for a message that starts while the link already carries another
            one, s (``None``: always ``latency_s``). On a host whose ranks share cores, a
            message that arrives while other copies are in progress waits for its process to
            be scheduled again: its latency is a scheduling delay, not the idle α.
        busy_latency_by_flows: the same by how many messages are in flight when it starts:
            entry ``k − 1`` with ``k`` others in flight (the last entry for more), s; empty:
            ``busy_latency_s`` whatever their number. On a host of ``c`` cores the delay grows
            with the number of ranks that are runnable at once (:mod:`lab.calibrate`'s chain
            of dependent exchanges among ``k`` ranks measures it).
        ack_fraction: bytes a transfer crossing this link in one direction puts on the
            *other* direction per byte it carries (TCP's acknowledgements), in units of the
            link's bandwidth; 0 leaves the directions independent. Counted by ``fair`` sharing
            only: a port that sends while it receives carries its own data plus the
            acknowledgements of what it receives.
        solo_bandwidth_Bps: B in each direction while a single transfer crosses the channel,
            bytes/s (``None``: always ``bandwidth_Bps``). Counted by ``fair`` sharing only. A
            host's loopback "bus" moves one message at the rate a ping-pong measures but several
            at once at the aggregate rate concurrent exchanges measure, which may be lower:
            each byte is copied by the CPUs at both ends, and two messages each way keep both
            cores busy with four copies (:meth:`Topology.shared_bus`).
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
        bandwidth_by_load: the channel's aggregate rate by the bytes of the messages it
            carries at once, ``((load_bytes, Bps), …)`` by increasing load, interpolated
            log-linearly between points and flat beyond the ends (empty: ``bandwidth_Bps``
            whatever the load). Counted by ``fair`` sharing only, and only while it carries two
            or more messages (one alone moves at ``solo_bandwidth_Bps``). A host's loopback copies
            messages through its caches: two 512 KiB messages crossing at once move their bytes
            about two and a half times as fast as two 8 MiB ones, whose copies run at the speed
            of memory.
    """

    latency_s: float
    bandwidth_Bps: float
    contention: Contention = "fair"
    busy_latency_s: float | None = None
    ack_fraction: float = 0.0
    busy_latency_by_flows: tuple[float, ...] = ()
    solo_bandwidth_Bps: float | None = None
    count_simultaneous: bool = False
    one_way_pair_latency_s: float | None = None
    bandwidth_by_load: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if not self.latency_s >= 0:
            raise ValueError(f"link latency must be >= 0 s, got {self.latency_s}")
        if not self.bandwidth_Bps > 0:
            raise ValueError(f"link bandwidth must be > 0 bytes/s, got {self.bandwidth_Bps}")
        if self.contention not in CONTENTION_MODELS:
            raise ValueError(f"unknown contention model {self.contention!r}; "
                             f"choose one of {', '.join(CONTENTION_MODELS)}")
        if not 0.0 <= self.ack_fraction < 1.0:
            raise ValueError(f"ack_fraction must be in [0, 1), got {self.ack_fraction}")
        if self.solo_bandwidth_Bps is not None and not self.solo_bandwidth_Bps > 0:
            raise ValueError(f"solo bandwidth must be > 0 bytes/s, got {self.solo_bandwidth_Bps}")
        loads = [load for load, _ in self.bandwidth_by_load]
        if any(not (load > 0 and rate > 0) for load, rate in self.bandwidth_by_load) or (
                loads != sorted(set(loads))):
            raise ValueError("bandwidth_by_load needs positive loads, increasing, with positive "
                             f"rates; got {self.bandwidth_by_load}")

    @property
    def beta_s_per_B(self) -> float:
        """β = 1/B, seconds per byte."""
        return 1.0 / self.bandwidth_Bps

    def time(self, nbytes: float) -> float:
        """α + n/B: the uncontended time of one ``nbytes`` message, s."""
        return self.latency_s + nbytes / self.bandwidth_Bps

    def rate_at_load(self, load_bytes: float) -> float:
        """The aggregate rate while messages totalling ``load_bytes`` cross, bytes/s
        (:attr:`bandwidth_by_load`, or ``bandwidth_Bps`` without a table)."""
        if not self.bandwidth_by_load:
            return self.bandwidth_Bps
        return log_interpolate(self.bandwidth_by_load, load_bytes)


def log_interpolate(table: Sequence[tuple[float, float]], x: float) -> float:
    """The value at ``x`` of a table ``((x, y), …)`` by increasing ``x`` > 0: linear in
    log ``x`` between its points, flat beyond its ends."""
    if x <= table[0][0]:
        return table[0][1]
    for (lo, a), (hi, b) in itertools.pairwise(table):
        if x <= hi:
            return a + (b - a) * math.log(x / lo) / math.log(hi / lo)
    return table[-1][1]
