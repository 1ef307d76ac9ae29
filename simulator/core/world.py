"""What the ranks of one simulation share, and the handles a rank waits on
(:mod:`simulator.core.comm` is the rank's side).

A :class:`World` holds the SimPy environment, the cluster and its network, the trace, and the
meeting points where a message's sender and receiver find each other: one SimPy event per
message, made by whichever side comes first. Messages between two ranks with one tag match in
order: the ``k``-th send with the ``k``-th receive. The process path keys each message by
(group, source, destination, tag, sequence number); the direct path (:func:`direct_messages`)
keeps a *mailbox* per (group, source, destination, tag) — the arrivals of sends not yet
received, or of receives not yet sent, in posting order.
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

    __slots__ = ("_event",)

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
    # what each blocked rank waits for: (verb, peer, tag), put in words on a deadlock
    waiting: dict[int, tuple[str, int | None, int]] = field(default_factory=dict)
    # the direct path's mailboxes: (arrival, posted by the sender, bytes, receiver) by key
    mailboxes: dict[tuple[Any, ...], list[tuple[simpy.Event, bool, Any, Any]]] = field(
        default_factory=dict)
    group_ids: dict[tuple[int, ...], int] = field(default_factory=dict)
    direct: bool = False  # messages without processes (:func:`direct_messages`)
    _everyone: tuple[int, ...] = ()  # the whole world's ranks, made once (see :meth:`everyone`)

    def everyone(self) -> tuple[tuple[int, ...], int]:
        """The whole world's ranks ``(0, …, p−1)`` and their group id, made once: every rank's
        default group is this one, and building and hashing a ``p``-tuple per rank would cost
        ``O(p²)`` on thousands of ranks."""
        if not self._everyone:
            self._everyone = tuple(range(self.cluster.world_size))
        return self._everyone, self.group_id(self._everyone)

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

    def meet(self, key: tuple[Any, ...], sending: bool, nbytes: int | None,
             receiver: tuple[int, int] = (0, 0)) -> simpy.Event:
        """The arrival event of the next message on ``key`` (group, source, destination, tag)
        for its sender (``sending``, ``nbytes`` sent) or its receiver (``nbytes`` expected,
        ``None``: any; ``receiver``: its group rank and the source's, for the error), made by
        whichever side comes first (the direct path's mailbox).

        Raises:
            ValueError: when the receiver expects another size than the sender sends.
        """
        box = self.mailboxes.get(key)
        if box is None:
            event = self.env.event()
            self.mailboxes[key] = [(event, sending, nbytes, receiver)]
            return event
        if box[0][1] is sending:  # more of the same side waiting
            event = self.env.event()
            box.append((event, sending, nbytes, receiver))
            return event
        event, _, other, waiting = box.pop(0)  # the other side is waiting: match
        if not box:
            del self.mailboxes[key]
        sent, expected, (rank, src) = ((nbytes, other, waiting) if sending
                                       else (other, nbytes, receiver))
        if expected is not None and sent != expected:
            raise ValueError(f"rank {rank} expected {expected} B from rank {src} "
                             f"(tag {key[3]}) but {sent} B were sent")
        return event

    def waiting_for(self, rank: int) -> str:
        """What a stuck rank waits for, in words (``recv from 3 (tag 0)``)."""
        what = self.waiting.get(rank)
        if what is None:
            return "waiting"
        verb, peer, tag = what
        return verb if peer is None else f"{verb} {peer} (tag {tag})"

    def group_id(self, ranks: tuple[int, ...]) -> int:
        """A small number naming a group (cheap to hash in every message key)."""
        return self.group_ids.setdefault(ranks, len(self.group_ids))


def direct_messages(cluster: Cluster) -> bool:
    """Whether messages may go without SimPy processes: on a textbook-tier cluster (no host
    effects) whose links share by ``none`` or ``fair`` contention. There the order in which
    events of one instant run changes nothing — fair rates are settled once per instant,
    after every start and end — so a send can be a timer and a flow (plain callbacks of the
    :class:`~simulator.core.kernel.Kernel`) and a receive the message's arrival event, met in
    a mailbox: under three queue entries a message instead of about eight. Where a host effect
    counts what is in flight at an instant, or a ``fifo`` queue serves in arrival order, the
    processes keep the order they always had."""
    return cluster.textbook_tier and all(
        link.contention != "fifo" for link in cluster.topology.links.values())
