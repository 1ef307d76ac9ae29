"""Max-min fair sharing of ``fair`` channels among the transfers crossing them
(:mod:`simulator.core.network`): the bandwidth phase of every message on such a channel is a
:class:`Flow`, and :class:`FairShare` keeps their rates max-min fair as flows start and end.

Two things keep a large simulation fast. Rates are settled once per instant, after every flow
starting or ending at that instant has been counted (a ring step in which ``p`` ranks start
sending costs one allocation, not ``p``). And only the flows a change can touch are
recomputed: the max-min fair rates of flows that share no channel — directly or through
other flows — do not depend on each other, so a change reallocates its connected component
(:meth:`FairShare._component`) and leaves the rest, whose ends stay queued in a heap. A flow's
bytes left are brought up to date lazily, when its rate changes.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import simpy

from simulator.core.kernel import later
from simulator.core.network.host_hooks import LinkEffects
from simulator.core.network.link import Channel
from simulator.core.network.topology import Topology

_TEXTBOOK = LinkEffects()  # a link without host effects


class Flow:
    """A transfer in the bandwidth phase on ``fair`` channels.

    ``done(value)`` is called when the last byte has moved. ``buffered``, if given, is
    triggered once ``remaining`` ≤ ``buffer_bytes`` (the moment a blocking send returns to a
    sender whose socket buffer holds ``buffer_bytes``). ``weight``: what each byte takes of a
    channel it shares, ``lone_weight`` of a channel it crosses alone (a queued send's,
    :meth:`Network.transfer`). ``touches``: every channel it uses, its own and its
    acknowledgements' (worked out from ``channels`` and ``acks`` when not given).
    """

    __slots__ = ("acks", "buffer_bytes", "buffered", "cap", "channels", "done", "lone_weight",
                 "rate", "remaining", "size", "t_ref", "touches", "value", "version", "weight")

    def __init__(self, nbytes: float, channels: Sequence[Channel], cap: float,
                 done: Callable[[Any], Any], value: Any = None,
                 acks: Sequence[tuple[Channel, float]] = (),
                 buffered: simpy.Event | None = None, buffer_bytes: float = 0.0,
                 weight: float = 1.0, lone_weight: float = 1.0,
                 touches: Sequence[Channel] | None = None) -> None:
        self.remaining = float(nbytes)
        self.size = float(nbytes)  # the whole message: what a by-load channel counts
        self.channels = tuple(channels)
        self.cap = cap
        self.done = done
        self.value = value
        self.touches = (touches if touches is not None
                        else (*channels, *(a for a, _ in acks)))
        self.rate = 0.0
        self.acks = acks
        self.buffered = buffered
        self.buffer_bytes = float(buffer_bytes)
        self.weight = weight
        self.lone_weight = lone_weight
        self.t_ref = 0.0  # the time at which ``remaining`` was last brought up to date, s
        self.version = 0  # bumped when the rate changes: older wake-up entries are stale

    def advance(self, now: float) -> None:
        """Bring ``remaining`` up to ``now`` at the current rate."""
        elapsed = now - self.t_ref
        if elapsed > 0:
            self.remaining -= self.rate * elapsed
        self.t_ref = now

    def until_buffered(self) -> float:
        """Bytes still to move before ``buffered`` fires (inf: no such event pending)."""
        if self.buffered is None or self.buffered.triggered:
            return math.inf
        return max(self.remaining - self.buffer_bytes, 0.0)


class FairShare:
    """The flows in flight in one SimPy environment on one topology, and their rates."""

    def __init__(self, env: simpy.Environment, topology: Topology) -> None:
        self.env = env
        self._later = later(env)
        self.topology = topology
        self._bandwidth_Bps: dict[Channel, float] = {}
        self._solo_Bps: dict[Channel, float | None] = {}
        self._slowest_Bps: dict[Sequence[Channel], float] = {}  # by route, for _alone
        self._flows: dict[Flow, None] = {}  # in flight, in the order they started
        self._users: dict[Channel, dict[Flow, None]] = {}  # flows (data or acks) by channel
        self._dirty: dict[Channel, None] = {}  # channels whose flows changed this instant
        self._due: list[tuple[float, int, Flow, int]] = []  # (time, seq, flow, its version)
        self._seq = itertools.count()
        self._version = 0
        self._settling = False
        # host effects of links whose rate depends on the bytes they carry at once, by channel
        self._by_load: dict[Channel, LinkEffects] = {}
        for key, link in topology.links.items():
            if link.host is not None and link.host.bandwidth_by_load:
                a, b = tuple(key)
                self._by_load[(a, b)] = self._by_load[(b, a)] = link.host

    def _add_flow(self, flow: Flow) -> None:
        flow.t_ref = self.env.now
        self._flows[flow] = None
        users, dirty = self._users, self._dirty
        for channel in flow.touches:
            on = users.get(channel)
            if on is None:
                users[channel] = {flow: None}
            else:
                on[flow] = None
            dirty[channel] = None
        self._invalidate()

    def _remove_flow(self, flow: Flow) -> None:
        del self._flows[flow]
        for channel in flow.touches:
            users = self._users[channel]
            users.pop(flow, None)
            if not users:
                del self._users[channel]
            self._dirty[channel] = None

    def _invalidate(self) -> None:
        """The rates are out of date: disarm the wake-up, and settle once later this instant
        (a zero timer: after whatever else starts or ends at this instant)."""
        self._version += 1
        if not self._settling:
            self._settling = True
            self._later(0, self._settle, None)

    def _settle(self, _: None) -> None:
        self._settling = False
        self._reschedule()

    def _components(self) -> list[list[Flow]]:
        """The flows whose rates may have changed, by connected component: every flow joined
        to a changed channel through channels shared with other flows. Max-min fair rates of
        flows that share no channel, directly or through others, do not depend on one another,
        so only these are recomputed, one component at a time."""
        components: list[list[Flow]] = []
        found: set[Flow] = set()
        seen: set[Channel] = set()
        users = self._users
        for start in self._dirty:
            if start in seen or start not in users:
                continue  # reached from an earlier start (in its component), or unused now
            seen.add(start)
            on = users[start]
            if len(on) == 1:  # a flow alone on all its channels is a component of its own
                lone = next(iter(on))
                if lone not in found:
                    for channel in lone.touches:
                        if len(users[channel]) != 1:
                            break
                    else:
                        found.add(lone)
                        seen.update(lone.touches)
                        components.append([lone])
                        continue
            component: list[Flow] = []
            stack = [start]
            while stack:
                for flow in users.get(stack.pop(), ()):
                    if flow not in found:
                        found.add(flow)
                        component.append(flow)
                        for channel in flow.touches:
                            if channel not in seen:
                                seen.add(channel)
                                stack.append(channel)
            if component:
                components.append(component)
        self._dirty.clear()
        return components

    def _reschedule(self) -> None:
        """Recompute the max-min fair rates of the flows a change touched, queue when each of
        them ends (or reaches its buffer), and arm a wake-up for the earliest such moment."""
        now = self.env.now
        for changed in self._components():
            for flow in changed:
                flow.advance(now)
            if len(changed) == 1 and not changed[0].acks:
                flow = changed[0]
                flow.rate = self._alone(flow)
                flow.version += 1
                if flow.buffered is None:  # _queue, inlined for the common flow
                    heapq.heappush(self._due, (now + max(flow.remaining, 0.0) / flow.rate,
                                               next(self._seq), flow, flow.version))
                else:
                    self._queue(flow)
                continue
            self._allocate(changed)
            for flow in changed:
                flow.version += 1
                self._queue(flow)
        self._version += 1
        due = self._due
        while due and (due[0][2].version != due[0][3] or due[0][2] not in self._flows):
            heapq.heappop(due)  # stale: the flow's rate changed since, or it ended
        if due:
            self._later(max(due[0][0] - now, 0.0), self._wake, self._version)

    def _alone(self, flow: Flow) -> float:
        """The rate of a flow that shares none of its channels: what its slowest channel
        carries for it alone (solo rate, or rate at its own load), or its cap — what
        :meth:`_allocate` gives it, without the bookkeeping. Where no channel's rate depends
        on the load, the slowest channel's rate is kept per route (dividing by the weight
        after taking the minimum is exact: rounding is monotone)."""
        slowest = self._slowest_Bps.get(flow.channels)
        if slowest is not None:
            return min(flow.cap, slowest / flow.lone_weight)
        rate, slowest = flow.cap, math.inf
        for channel in flow.channels:
            solo = self._solo(channel)
            if solo is not None:
                bandwidth = solo
            elif channel in self._by_load:
                bandwidth = self._by_load[channel].rate_at_load(flow.size)
            else:
                bandwidth = self._bandwidth(channel)
            rate = min(rate, bandwidth / flow.lone_weight)
            slowest = min(slowest, bandwidth)
        if not any(channel in self._by_load for channel in flow.channels):
            self._slowest_Bps[tuple(flow.channels)] = slowest
        return rate

    def _queue(self, flow: Flow) -> None:
        """Queue the moment ``flow`` next needs attention: its end, or its buffer's, s."""
        left = min(max(flow.remaining, 0.0), flow.until_buffered())
        heapq.heappush(self._due, (flow.t_ref + left / flow.rate, next(self._seq), flow,
                                   flow.version))

    def _wake(self, version: int) -> None:
        if version != self._version:
            return  # a transfer started or ended since: a newer wake-up is armed
        now = self.env.now
        # Due: what is left would take under a picosecond (floating-point dust).
        due, finished = self._due, []
        while due and due[0][0] <= now + 1e-12:
            _, _, flow, flow_version = heapq.heappop(due)
            if flow.version != flow_version or flow not in self._flows:
                continue
            if (flow.buffered is not None and not flow.buffered.triggered
                    and flow.t_ref + flow.until_buffered() / flow.rate <= now + 1e-12):
                flow.buffered.succeed()
            if flow.t_ref + max(flow.remaining, 0.0) / flow.rate <= now + 1e-12:
                finished.append(flow)
            else:
                self._queue(flow)  # its buffer was due, its end is not
        for flow in finished:
            self._remove_flow(flow)
            flow.done(flow.value)
        self._invalidate()

    def _bandwidth(self, channel: Channel) -> float:
        bandwidth = self._bandwidth_Bps.get(channel)
        if bandwidth is None:
            bandwidth = self._bandwidth_Bps[channel] = self.topology.link(channel).bandwidth_Bps
        return bandwidth

    def _solo(self, channel: Channel) -> float | None:
        if channel not in self._solo_Bps:
            host = self.topology.link(channel).host or _TEXTBOOK
            self._solo_Bps[channel] = host.solo_bandwidth_Bps
        return self._solo_Bps[channel]

    def _allocate(self, changed: list[Flow]) -> None:
        """Progressive filling: raise all unfrozen rates together until a channel fills.

        ``users[c]`` counts the unfrozen flows on channel ``c`` (a flow whose acknowledgements
        cross ``c`` counts the link's ``ack_fraction``, :class:`LinkEffects`; a flow that
        shares ``c`` with another counts its ``weight``, and one alone on ``c`` its
        ``lone_weight``); a flow freezes when one of its channels is full or it reaches its
        cap, and leaves its channels' counts. A channel's solo rate applies while one flow
        crosses it.
        """
        left: dict[Channel, float] = {}
        users: dict[Channel, float] = {}
        flows: dict[Channel, float] = {}  # flows and acknowledgements, unweighted
        crossing: dict[Channel, int] = {}  # flows only
        load: dict[Channel, float] = {}
        for flow in changed:
            flow.rate = 0.0
            for channel in flow.channels:
                left[channel] = self._bandwidth(channel)
                crossing[channel] = crossing.get(channel, 0) + 1
                load[channel] = load.get(channel, 0.0) + flow.size
            for channel, share in flow.acks:
                left[channel] = self._bandwidth(channel)
                users[channel] = users.get(channel, 0) + share
                flows[channel] = flows.get(channel, 0) + share

        def weight(flow: Flow, channel: Channel) -> float:
            return flow.weight if crossing[channel] > 1 else flow.lone_weight

        for flow in changed:
            for channel in flow.channels:
                users[channel] = users.get(channel, 0) + weight(flow, channel)
                flows[channel] = flows.get(channel, 0) + 1
        for channel, count in flows.items():
            solo = self._solo(channel)
            if solo is not None and count <= 1 + 1e-12:
                left[channel] = solo
            elif channel in self._by_load:
                left[channel] = self._by_load[channel].rate_at_load(load.get(channel, 0.0))
        full_at = {c: 1e-9 * rate for c, rate in left.items()}  # of what it can carry now
        active = changed
        while active:
            step = min((left[c] / n for c, n in users.items() if n > 1e-12), default=math.inf)
            step = min(step, min(f.cap - f.rate for f in active))
            for flow in active:
                flow.rate += step
            for c, n in users.items():
                left[c] -= step * n
            unfrozen = []
            for flow in active:
                full = any(left[c] <= full_at[c] for c in flow.touches)
                if full or flow.rate >= flow.cap * (1 - 1e-12):
                    for c in flow.channels:
                        users[c] -= weight(flow, c)
                    for c, share in flow.acks:
                        users[c] -= share
                else:
                    unfrozen.append(flow)
            active = unfrozen
