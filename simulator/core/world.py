"""What the ranks of one simulation share, and the handles a rank waits on
(:mod:`simulator.core.comm` is the rank's side).

A :class:`World` holds the SimPy environment, the cluster and its network, the trace, and the
meeting points where a message's sender and receiver find each other: one SimPy event per
message, keyed by (group, source, destination, tag, sequence number), made by whichever side
comes first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import simpy

from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.core.host_hooks import ClusterEffects
from simulator.core.network import Network


class SimDeadlock(RuntimeError):
    """The simulation ran out of events while some ranks still waited."""


class SimWork:
    """A pending non-blocking operation, like ``torch.distributed.Work``: ``yield w.wait()``."""

    def __init__(self, event: simpy.Event) -> None:
        self._event = event

    def wait(self) -> simpy.Event:
        """The event to yield on; its value is the operation's result."""
        return self._event

    def is_completed(self) -> bool:
        """Whether the operation has finished."""
        return bool(self._event.triggered)


@dataclass
class World:
    """What all ranks of one simulation share."""

    env: simpy.Environment
    cluster: Cluster
    network: Network
    trace: Trace | None
    host: ClusterEffects  # the cluster's host effects; the defaults (none) in the textbook tier
    arrivals: dict[tuple[Any, ...], simpy.Event] = field(default_factory=dict)
    ready: dict[tuple[Any, ...], simpy.Event] = field(default_factory=dict)
    sent: dict[tuple[Any, ...], int] = field(default_factory=dict)
    received: dict[tuple[Any, ...], int] = field(default_factory=dict)
    memory: list[int] = field(default_factory=list)
    posted_until: list[float] = field(default_factory=list)
    peak_memory: list[int] = field(default_factory=list)
    waiting: dict[int, str] = field(default_factory=dict)
    group_ids: dict[tuple[int, ...], int] = field(default_factory=dict)
    direct: bool = False  # messages without processes (:func:`direct_messages`)

    def arrival(self, key: tuple[Any, ...]) -> simpy.Event:
        """The event of one message's arrival (made by whichever side comes first)."""
        return self._meeting(self.arrivals, key)

    def ready_notice(self, key: tuple[Any, ...]) -> simpy.Event:
        """The event of one message's receive-ready notice reaching its sender (made by
        whichever side comes first)."""
        return self._meeting(self.ready, key)

    def _meeting(self, events: dict[tuple[Any, ...], simpy.Event],
                 key: tuple[Any, ...]) -> simpy.Event:
        event = events.get(key)
        if event is None:
            event = events[key] = self.env.event()
        return event

    def group_id(self, ranks: tuple[int, ...]) -> int:
        """A small number naming a group (cheap to hash in every message key)."""
        return self.group_ids.setdefault(ranks, len(self.group_ids))


def direct_messages(cluster: Cluster) -> bool:
    """Whether messages may go without SimPy processes: on a textbook-tier cluster (no host
    effects) whose links share by ``none`` or ``fair`` contention. There the order in which
    events of one instant run changes nothing — fair rates are settled once per instant,
    after every start and end — so a send can be a timer and a flow, and a receive a callback
    on the message's arrival: two events a message instead of about eight. Where a host effect
    counts what is in flight at an instant, or a ``fifo`` queue serves in arrival order, the
    processes keep the order they always had."""
    return cluster.textbook_tier and all(
        link.contention != "fifo" for link in cluster.topology.links.values())
