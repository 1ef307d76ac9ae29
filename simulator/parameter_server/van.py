"""The van, simulated: how one PS message moves from one node to another.

Twin of :mod:`backends.parameter_server.van`. A message is coded on the sender's cores, then
each of its parts (:func:`~simulator.parameter_server.message.message_nbytes`) moves at the
cluster network's cost, or at the van's measured cost
(:class:`~simulator.parameter_server.spec.VanLink`, on a cluster whose links cost nothing:
:func:`van_cluster`). Over gloo every part is a rendezvous and the header is taken by a receive
from any source (:class:`AnySource`); PS-Lite's ZeroMQ van queues what it sends and the sender
goes on (``rendezvous=False``).
"""

from __future__ import annotations

from typing import Any

import simpy

from simulator.core.comm import SimComm, SimGen
from simulator.core.hardware import Cluster
from simulator.parameter_server.cpu import CpuPool
from simulator.parameter_server.message import READY_TAG
from simulator.parameter_server.spec import PSCosts, VanLink

ZERO_COST_LINK_BPS = 1e15
"""Bandwidth of the cluster links that only carry the messages when a :class:`VanLink` prices
them (bytes/s; latency 0)."""


def van_cluster(cluster: Cluster) -> Cluster:
    """``cluster`` with links that cost nothing: the messages still travel (and rendezvous),
    but a :class:`VanLink` sets their time."""
    from dataclasses import replace

    from simulator.core.network import Link, Topology

    link = Link(0.0, ZERO_COST_LINK_BPS)
    return replace(cluster, topology=Topology.fully_connected(cluster.world_size, link))


def _transfer(comm: SimComm, cpu: CpuPool, dst: int, nbytes: int, tag: int,
              van: VanLink | None, header: bool, fan_in: int) -> SimGen:
    """Move one part of a PS message: at the van link's measured cost (on the shared cores,
    or as a delay), or at the cluster network's."""
    if van is not None:
        if van.on_cores:
            yield from cpu.run(van.time(nbytes, header, fan_in))
        else:
            yield comm.env.timeout(van.time(nbytes, header, fan_in))
    yield from comm.send(dst, nbytes, tag)


class AnySource:
    """The handshake of a header sent to a receive *from any source* over gloo, per pair.

    gloo's sends are receiver-driven: a sender announces its message (send-ready notice), and
    a receive from any source takes the first announced sender once the receiving thread posts
    it, tells that sender to go (recv-ready), and only then do the bytes move. Both notices
    are handled by gloo's own loop threads, not the van's; together they cost
    ``PSCosts.anysource_s`` (measured by ping-pong: a receive from any source against a named
    one, :func:`lab.parameter_server.measure_anysource`). So a header to a node whose receiving
    thread is busy waits, unsent, until the thread is free: it is not in flight.
    """

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._stores: dict[tuple[str, int, int, int], simpy.Store] = {}

    def _store(self, kind: str, src: int, dst: int, tag: int) -> simpy.Store:
        key = (kind, src, dst, tag)
        if key not in self._stores:
            self._stores[key] = simpy.Store(self.env)
        return self._stores[key]

    def announce(self, src: int, dst: int, tag: int) -> Any:
        """The sender announces its next header; returns the event of being told to go."""
        self._store("ready", src, dst, tag).put(True)
        return self._store("go", src, dst, tag).get()

    def announced(self, src: int, dst: int, tag: int) -> Any:
        """The event of ``src``'s next header being announced to ``dst``."""
        return self._store("ready", src, dst, tag).get()

    def go(self, src: int, dst: int, tag: int) -> None:
        """``dst``'s receiving thread takes ``src``'s announced header."""
        self._store("go", src, dst, tag).put(True)


def send_message(comm: SimComm, cpu: CpuPool, dst: int, parts: list[int], tag: int,
                 costs: PSCosts, van: VanLink | None = None, fan_in: int = 1,
                 rendezvous: bool = True, anysource: AnySource | None = None) -> SimGen:
    """Send one PS message as the van does over gloo: code it, then every part is a
    rendezvous (gloo's sends are receiver-driven: a part moves only once the receiver has
    posted its receive). The header goes to a receive from any source (:class:`AnySource`):
    it waits until the receiving thread of ``dst`` is free and takes it, then pays the
    handshake's ``anysource_s``; each payload waits until the receiver, having read the
    header, says it has posted the receive for it. With a measured :class:`VanLink`
    (``fan_in``: peers sending to ``dst``) the handshakes are in its costs: the ready signal
    then travels on the zero-cost cluster. Without ``rendezvous`` (PS-Lite's ZeroMQ van
    queues what it sends) every part is handed to the network and the sender goes on at
    once."""
    yield from cpu.run(costs.message_s)
    if not rendezvous:
        for nbytes in parts:
            comm.isend(dst, nbytes, tag)
        return
    if anysource is not None:
        yield anysource.announce(comm.rank, dst, tag)
    if costs.anysource_s:
        yield comm.env.timeout(costs.anysource_s)
    yield from _transfer(comm, cpu, dst, parts[0], tag, van, True, fan_in)
    for nbytes in parts[1:]:
        yield from comm.recv(dst, 0, READY_TAG)
        yield from _transfer(comm, cpu, dst, nbytes, tag, van, False, fan_in)


def recv_message(comm: SimComm, cpu: CpuPool, src: int, parts: list[int], tag: int,
                 costs: PSCosts, header: bool = True, rendezvous: bool = True) -> SimGen:
    """Receive one PS message: the header (unless already taken), then each payload after
    telling the sender the receive is posted."""
    if header:
        yield from comm.recv(src, parts[0], tag)
    yield from cpu.run(costs.message_s)
    for nbytes in parts[1:]:
        if rendezvous:
            comm.isend(src, 0, READY_TAG)
        yield from comm.recv(src, nbytes, tag)
