"""A lone message's latency and rate, solved so that the simulated ping-pong takes its measured
time.

The calibration's ping-pong (:mod:`lab.calibrate`: rank 0 sends ``n`` bytes to rank 1 and gets
them back, blocking ``send``/``recv``, calls back to back) is fitted to ``t(n) = α + n/B`` —
the Hockney model of every textbook. The collectives' loopback model puts more around a
message than that fit knows: posting costs the rank LogP's *o*, a send waits for its
receiver's receive-ready notice, and the notice and the posts overlap the previous message's
flight in ways the fit has folded into α. So the simulated ping-pong, with the fitted α and B,
is not the measured one: on the lab's two-core VM it came out 13–25 % slow up to 64 KiB (the
posting and the notice counted on top of an α that already held them) and 4–14 % fast at
2–16 MiB (a straight line through 17 sizes bends at both ends).

As :mod:`simulator.host.wakeup` does for the busy latencies and :mod:`simulator.host.bus` for
the bus, this module makes the model reproduce the primitive it is calibrated from:

* :func:`idle_latency` — the α of a message that starts on an idle bus, solved so that the
  simulated ping-pong of the latency-bound sizes (whose bytes are less than
  :data:`LATENCY_BOUND_SHARE` of their time) takes their measured time, median over them;
* :func:`port_rates` — each rank's port rate by the bytes it carries at once, solved so that
  the simulated ping-pong of the other sizes takes their measured time (a lone message's
  rate; a port shared by several messages is priced at their total, and the shared bus
  still limits them);
* :func:`stream_weights` — what each byte of a *queued* lone message weighs, solved so that
  the simulated stream one way (:func:`simulator.collectives.point_to_point.stream`, OSU's
  bandwidth test) takes its measured time. A ping-pong's sends find their receiver's notice —
  the blocking send that began the round trip returned once its socket buffer held the rest
  (:attr:`ClusterEffects.send_buffer_bytes`), so the reply's receive was posted before the reply —
  while a stream's do not: each is posted the moment the last one returned, before the
  receiver has posted its next receive. Gloo's I/O thread writes such a send when the notice
  comes, and on the lab's host a stream of them moved 1 MiB and more a fifth to a third
  slower than the ping-pong (benchmarks/NOTES.md, "A stream one way").
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from simulator.host.bus import weights_by_size

if TYPE_CHECKING:
    from simulator.core.hardware import Cluster

CALLS = 4
"""Ping-pongs simulated back to back to time one, as the calibration times them back to back."""
ROUNDS = 3
"""Rescaling rounds of :func:`idle_latency` and :func:`port_rates`."""
LATENCY_BOUND_SHARE = 0.25
"""A size whose bytes, at the fitted rate, are less than this share of its measured one-way time
is latency-bound: it fixes α and no rate (:func:`idle_latency`); the others fix rates and no α
(:func:`port_rates`)."""


def one_way_s(cluster: Cluster, nbytes: int, calls: int = CALLS) -> float:
    """Simulated one-way time of the calibration's ping-pong
    (:func:`simulator.collectives.point_to_point.ping_pong`: blocking, half a round trip,
    ``calls`` back to back), s."""
    from simulator.collectives.point_to_point import ping_pong
    from simulator.core.comm import run_spmd

    return run_spmd(cluster, ping_pong, nbytes, trace=False, calls=calls).makespan_s / (2 * calls)


def latency_bound(sizes: Sequence[int], times_s: Sequence[float], bandwidth_Bps: float
                  ) -> list[bool]:
    """For each measured size: are its bytes, at ``bandwidth_Bps``, less than
    :data:`LATENCY_BOUND_SHARE` of its time?"""
    return [n / bandwidth_Bps < LATENCY_BOUND_SHARE * t
            for n, t in zip(sizes, times_s, strict=True)]


def idle_latency(build: Callable[[float], Cluster], sizes: Sequence[int],
                 times_s: Sequence[float], alpha_s: float, bandwidth_Bps: float) -> float:
    """The α (s) with which the cluster ``build(α)`` simulates the ping-pong of the
    latency-bound sizes (:func:`latency_bound`) in their measured one-way times
    (``times_s``, s): ``ROUNDS`` rounds of moving α by the median of measured − simulated,
    from the fitted ``alpha_s``, never below 0. ``alpha_s`` if no size is latency-bound."""
    points = [(n, t) for n, t, bound in zip(sizes, times_s,
                                           latency_bound(sizes, times_s, bandwidth_Bps),
                                           strict=True) if bound and n > 0 and t > 0]
    alpha = alpha_s
    if not points:
        return alpha
    for _ in range(ROUNDS):
        cluster = build(alpha)
        alpha = max(0.0, alpha + statistics.median(t - one_way_s(cluster, n) for n, t in points))
    return alpha


def port_rates(build: Callable[[Sequence[tuple[float, float]]], Cluster], sizes: Sequence[int],
               times_s: Sequence[float], bandwidth_Bps: float
               ) -> tuple[tuple[float, float], ...]:
    """A port's rate by load, ``((n, Bps), …)``, with which the cluster ``build(table)``
    simulates the ping-pong of every size that is not latency-bound (:func:`latency_bound`) in
    its measured one-way time (``times_s``, s): each round solves ``t = fixed + n/rate`` for
    the rate, ``fixed`` being the simulated time less the bytes' share at the current rate
    (as :func:`simulator.host.bus.bus_rates` does). Empty when every size is latency-bound."""
    points = [(n, t) for n, t, bound in zip(sizes, times_s,
                                           latency_bound(sizes, times_s, bandwidth_Bps),
                                           strict=True) if not bound and n > 0 and t > 0]
    table = {float(n): bandwidth_Bps for n, _ in points}
    for _ in range(ROUNDS):
        cluster = build(sorted(table.items()))
        for n, target in points:
            fixed = one_way_s(cluster, n) - n / table[float(n)]
            on_bytes = target - fixed
            if on_bytes > LATENCY_BOUND_SHARE * target:  # else keep the rate: noise, not bytes
                table[float(n)] = n / on_bytes
    return tuple(sorted(table.items()))


STREAM_CALLS = 8
"""Messages of the stream simulated back to back to time one, as the calibration times the
stream back to back."""


def stream_s(cluster: Cluster, nbytes: int, calls: int = STREAM_CALLS) -> float:
    """Simulated time of one message of the stream one way
    (:func:`simulator.collectives.point_to_point.stream`, ``calls`` back to back), s."""
    from simulator.collectives.point_to_point import stream
    from simulator.core.comm import run_spmd

    return run_spmd(cluster, stream, nbytes, trace=False, calls=calls).makespan_s / calls


def stream_weights(build: Callable[[Sequence[tuple[float, float]]], Cluster],
                   sizes: Sequence[int], times_s: Sequence[float]
                   ) -> tuple[tuple[float, float], ...]:
    """A queued lone message's weight by size, ``((n, weight), …)``
    (:attr:`ClusterEffects.lone_queued_weight_by_bytes`), with which the cluster ``build(table)``
    simulates the calibration's stream one way of ``n`` bytes a message in its measured time
    (``times_s``, s, one message).

    Solved as the shared links' weights are (:func:`simulator.host.bus.weights_by_size`): a
    size that the cluster without weights already simulates in its measured time or less
    weighs 1 — a queued send is never priced faster than a direct one."""
    return weights_by_size(build, sizes, times_s, stream_s)
