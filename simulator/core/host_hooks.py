"""A cluster's host effects: the host tier's hook on a :class:`~simulator.core.hardware.Cluster`.

The textbook's cluster is devices (FLOP/s, γ, copy rate) and links (α, B, contention), and its
sends are MPI's: a send completes when its bytes have arrived, it moves as soon as it is
posted, posting is free, a reduction costs γ·n. A real transport on a real host does otherwise
— gloo over TCP returns a send once the socket buffers hold it, writes it only once the
receiver has said it is ready, costs CPU time to post, and a reduction among messages in flight
costs more than γ says. :class:`ClusterEffects` holds those corrections for one cluster, as
:attr:`Cluster.host`; in the textbook tier ``Cluster.host`` is ``None``. (A link's own
corrections are :class:`~simulator.core.network.LinkEffects`.)

The host tier sets these fields — :mod:`simulator.host` builds them from a calibration entry —
and :class:`~simulator.core.comm.SimComm` reads them. Each field is named, with the effect that
sets it, in :data:`simulator.host.effects.HOST_EFFECTS`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from simulator.core.network import log_interpolate


@dataclass(frozen=True)
class ClusterEffects:
    """The host effects on a cluster's sends and reductions; every default leaves the textbook
    cluster as it is.

    Attributes:
        buffered_sends: a send completes as soon as its bytes are handed to the sender's
            network stack, not when they arrive — gloo over TCP sizes the socket's send buffer
            to the message (up to 32 MiB), so on a real network a rank sends to one peer and
            at once to the next while the first message is still on the wire
            (:mod:`simulator.core.shaped`). Off: a send completes on delivery, as MPI's
            rendezvous sends of large messages do.
        send_buffer_bytes: with ``buffered_sends``, how much of a message the sender's socket
            buffer holds, bytes (``None``: all of it). A blocking send returns once at most
            this many of its bytes are still to move (Linux's TCP lets ``write`` return when
            the unsent rest fits in the socket's send buffer; Stevens, *UNIX Network
            Programming* §2.11); the transfer goes on. Measured by :mod:`lab.calibrate` on a
            shaped network.
        send_buffer_by_bytes: the same by message size, ``((bytes, buffered bytes), …)``
            interpolated in log size, in place of ``send_buffer_bytes`` where given — on
            loopback the "buffer" is also the receiver's socket, which holds what its I/O
            thread has not yet read, so what a send leaves unsent as it returns grows with the
            message (:func:`simulator.host.cluster.send_buffers`, from the ping-pong's send
            returns).
        receiver_driven_sends: a send's bytes move only once the receiver has posted the
            matching receive and its receive-ready notice has come back — gloo's TCP pair
            (``gloo/transport/tcp/pair.cc``: a send waits for the peer's "receive ready"
            notification unless one has already arrived). A receive posted early costs
            nothing; a sender that runs ahead of its receiver — the root of a tree broadcast
            started again while its children still forward the last one — waits. Off: eager
            sends.
        ready_notice_s: what that notice takes to reach the sender, s (``None``: the path's
            idle α). It is a few bytes handled by gloo's I/O threads, no Python wake-up, so on
            a host it costs less than a ping-pong's α (:mod:`lab.calibrate` measures it: a
            receive posted late against one posted early).
        post_overhead_s: the CPU time a rank spends posting one non-blocking send or receive,
            s (LogP's *o*, Culler et al. 1993): a rank's posts and local work run one after
            another, and a message leaves (or a receive is ready) only once posted. 0: free,
            as the α-β model has it.
        queued_weight_by_bytes: with ``receiver_driven_sends``, what each byte of a *queued*
            send takes of the capacity of a link it shares with other messages, by message
            size, ``((bytes, weight), …)`` interpolated in log size (empty: 1, a byte). A send
            is queued when its receiver's notice had not come as its rank began to post it:
            gloo then parks it, and its I/O thread writes it when the notice comes
            (``pair.cc``: ``localPendingSend_``), in bursts as the socket drains, instead of
            the calling thread at once; on the lab's two cores such bytes cost more CPU, and
            the plain exchange, whose sends are all queued, moved 1 MiB and more about a fifth
            slower than the shift posted ahead (benchmarks/NOTES.md, "A queued send weighs more").
        lone_queued_weight_by_bytes: the same for a link the queued send crosses alone (empty:
            1 — a message alone moves at the rate the ping-pong, whose sends find their
            notice, was solved to): alone, a stream of queued messages one way moved 1 MiB and
            more a fifth to a third slower than the ping-pong (benchmarks/NOTES.md, "A stream one
            way").
        reduce_s_by_bytes: a reduction's time by its bytes where the collectives run it, among
            messages in flight, ``((bytes, s), …)`` by increasing bytes (empty: γ·n on the
            rank's device). Between two sizes linear; below the smallest its time (a cost per
            reduction that does not shrink with the bytes); beyond the largest in proportion
            to the bytes (:mod:`simulator.host.reduction`). Every rank of a host shares it.
    """

    buffered_sends: bool = False
    send_buffer_bytes: float | None = None
    send_buffer_by_bytes: tuple[tuple[float, float], ...] = ()
    receiver_driven_sends: bool = False
    ready_notice_s: float | None = None
    post_overhead_s: float = 0.0
    queued_weight_by_bytes: tuple[tuple[float, float], ...] = ()
    lone_queued_weight_by_bytes: tuple[tuple[float, float], ...] = ()
    reduce_s_by_bytes: tuple[tuple[float, float], ...] = ()

    def send_buffer(self, nbytes: int) -> float | None:
        """The bytes of an ``nbytes`` message still unsent when its blocking send returns
        (:attr:`send_buffer_by_bytes`, else :attr:`send_buffer_bytes`; ``None``: all)."""
        table = self.send_buffer_by_bytes
        if table:
            return min(float(nbytes), log_interpolate(table, max(nbytes, 1)))
        return self.send_buffer_bytes

    def queued_weight(self, nbytes: int) -> float:
        """The weight of a queued send of ``nbytes`` on a shared link
        (:attr:`queued_weight_by_bytes`)."""
        table = self.queued_weight_by_bytes
        return log_interpolate(table, max(nbytes, 1)) if table else 1.0

    def lone_queued_weight(self, nbytes: int) -> float:
        """The weight of a queued send of ``nbytes`` on a link it crosses alone
        (:attr:`lone_queued_weight_by_bytes`)."""
        table = self.lone_queued_weight_by_bytes
        return log_interpolate(table, max(nbytes, 1)) if table else 1.0

    def reduce_s(self, nbytes: float) -> float:
        """Time to reduce ``nbytes`` (> 0) among messages in flight, s, read from
        :attr:`reduce_s_by_bytes` (which must not be empty)."""
        table = self.reduce_s_by_bytes
        if nbytes <= table[0][0]:
            return table[0][1]
        for (lo, a), (hi, b) in itertools.pairwise(table):
            if nbytes <= hi:
                return a + (b - a) * (nbytes - lo) / (hi - lo)
        return table[-1][1] * nbytes / table[-1][0]
