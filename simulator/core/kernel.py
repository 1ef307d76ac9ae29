"""The event kernel: a SimPy environment whose queue is kept by instant, with plain callbacks.

A discrete-event simulation is a queue of things to do, each at a time; the kernel takes the
earliest, sets the clock to its time and does it. SimPy's :class:`simpy.Environment` keeps
one heap entry per event, ordered by ``(time, priority, sequence number)``. In a collective
on ``p`` ranks most events come in crowds: the ``p`` sends of a ring step start at one instant
and end at another. :class:`Kernel` keeps one *bucket* per ``(time, priority)``: a FIFO of
what is due then, and a heap of the buckets' keys. An event due at an instant that already
has a bucket costs a list append instead of a heap push; the order in which things run is
SimPy's, exactly (by time, then priority, then the order they were scheduled in).

Besides SimPy's events, a bucket holds *plain callbacks*, ``(function, argument)`` pairs
scheduled with :meth:`Kernel.call_later`: the network's timers (a message's latency, the end
of a transfer, the settling of fair rates) need no :class:`simpy.Event` of their own, which
nobody waits for. Rank programs still yield SimPy events and run as SimPy processes: the
kernel is a :class:`simpy.Environment`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.core import EmptySchedule
from simpy.events import NORMAL, Event, EventPriority, Timeout

Callback = tuple[Callable[[Any], Any], Any]
"""A plain callback in the queue: ``function(argument)`` is called when it is due."""


class Kernel(simpy.Environment):
    """A :class:`simpy.Environment` with a bucketed queue and plain callbacks (see above)."""

    def __init__(self) -> None:
        super().__init__()
        self._keys: list[tuple[float, int]] = []  # heap of (time s, priority), one per bucket
        self._buckets: dict[tuple[float, int], deque[Event | Callback]] = {}

    def event(self) -> Event:
        """A new event (SimPy's, made without SimPy's per-access bound class)."""
        return Event(self)

    def timeout(self, delay: float = 0, value: Any = None) -> Timeout:
        """An event ``delay`` seconds from now (as :meth:`simpy.Environment.timeout`)."""
        return Timeout(self, delay, value)

    def schedule(self, event: Event, priority: EventPriority = NORMAL,
                 delay: float = 0) -> None:
        """Queue ``event`` ``delay`` seconds from now (SimPy's hook: every event comes here)."""
        key = (self._now + delay, priority)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = deque()
            heappush(self._keys, key)
        bucket.append(event)

    def call_later(self, delay_s: float, function: Callable[[Any], Any],
                   argument: Any = None) -> None:
        """Call ``function(argument)`` ``delay_s`` seconds from now, in order with the events
        due then (no :class:`simpy.Event` is made)."""
        key = (self._now + delay_s, NORMAL)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = deque()
            heappush(self._keys, key)
        bucket.append((function, argument))

    def _drop_empty(self) -> None:
        keys, buckets = self._keys, self._buckets
        while keys and not buckets[keys[0]]:
            del buckets[heappop(keys)]

    def peek(self) -> float:
        """The time of the next thing due, s (``inf`` when nothing is)."""
        self._drop_empty()
        return self._keys[0][0] if self._keys else float("inf")

    def step(self) -> None:
        """Do the next thing due (SimPy's ``step``; :meth:`run` without ``until`` inlines it)."""
        self._drop_empty()
        keys, buckets = self._keys, self._buckets
        if not keys:
            raise EmptySchedule
        key = keys[0]
        self._now = key[0]
        self._do(buckets[key].popleft())

    def _do(self, entry: Event | Callback) -> None:
        if entry.__class__ is tuple:
            function, argument = entry
            function(argument)
            return
        event: Event = entry  # type: ignore[assignment]
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
        try:
            for callback in callbacks:
                callback(event)
        except simpy.core.StopSimulation:
            # as SimPy: the rest of the callbacks run when the simulation resumes
            event.callbacks = callbacks[callbacks.index(callback) + 1:]
            self.schedule(event, EventPriority(-1))
            raise
        if not event._ok:
            self._failed(event)

    @staticmethod
    def _failed(event: Event) -> None:
        """A failed event that nobody handled crashes the run (as in SimPy)."""
        if not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc

    def run(self, until: Any = None) -> Any:
        """Run until nothing is due (``until=None``), or as :meth:`simpy.Environment.run`."""
        if until is not None:
            return super().run(until)
        keys, buckets, failed = self._keys, self._buckets, self._failed
        while keys:
            key = keys[0]
            bucket = buckets[key]
            self._now = key[0]
            # everything due at this key, unless something more urgent at this instant comes
            while bucket and keys[0] is key:
                entry = bucket.popleft()
                if isinstance(entry, tuple):
                    entry[0](entry[1])
                    continue
                callbacks, entry.callbacks = entry.callbacks, None  # type: ignore[assignment]
                for callback in callbacks:
                    callback(entry)
                if not entry._ok:
                    failed(entry)
            if not bucket and keys[0] is key:
                heappop(keys)
                del buckets[key]
        return None


def later(env: simpy.Environment) -> Callable[[float, Callable[[Any], Any], Any], None]:
    """``call_later(delay_s, function, argument)`` for ``env``: the kernel's own, or on a plain
    SimPy environment a timeout whose callback makes the call (the same order, one more
    event)."""
    if isinstance(env, Kernel):
        return env.call_later

    def call_later(delay_s: float, function: Callable[[Any], Any], argument: Any = None) -> None:
        env.timeout(delay_s).callbacks.append(lambda _: function(argument))

    return call_later
