"""Calibration: measure this machine's primitives and write the simulator's calibration file.

Only primitives are measured (DESIGN.md, "The lab"); each rank's part of each is in
:mod:`backends.primitives`, and this module launches them, fits them and saves the entry:

* **point-to-point** — a ping-pong sweep between ranks 0 and 1 over message sizes; the one-way
  time ``t(n)`` is half the round trip, and α, β come from a least-squares fit of
  ``t(n) = α + n·β`` that minimises *relative* error (so 1 KiB and 64 MiB points count alike);
  the fit's residuals are stored beside it;
* **concurrent exchange** — every rank pairs with a partner (0↔1, 2↔3, …) and both send at
  once (IMB's "Exchange" pattern), each posting its receive first as the collectives do; the
  aggregate bytes per second of all these messages is the host's *bus* bandwidth (on one
  machine, loopback messages share the same cores and memory), and the fit's intercept the
  latency of a message among others in flight. The collectives' model reads the exchange
  size by size: its rate depends on how many bytes are in flight
  (:mod:`simulator.host.bus`), solved from the same sizes sent round the ring as a ring
  posts its steps — each receive a step ahead (:func:`shift_ahead`), so that no send but a
  call's first waits for its receiver's notice — and, with three ranks or more, swapped
  between the partners posted the same way (:func:`swap_ahead`), which prices what a
  connection carrying both directions at once costs beyond that. All are timed in repeats of
  :data:`SUSTAINED_REPEAT_S` back to back, as the collectives' accuracy sweep times the
  algorithms. On a shaped
  network it is the *shift* instead — every rank receives from its left neighbour while it
  sends to its right one, the receive posted first — whose per-port rate against the
  ping-pong's prices the acknowledgements a port carries while it sends
  (:func:`simulator.core.shaped.ack_fraction`);
* **chain of dependent exchanges** — ranks ``0 … k−1`` pass small messages round a ring,
  each step (send right, receive from the left) waiting for the last, for ``k = 2 … world``;
  the time of one step, averaged over a long chain (:data:`CHAIN_STEPS`), is what a message
  among ``k`` in flight pays before its bytes move. With more runnable threads than cores (4
  ranks, each a main thread plus gloo's I/O thread, on 2 cores) a woken receiver may wait for
  a core, so this grows with ``k``; under the kernel's default policy it also takes in gloo's
  tick stalls, which the lab's ranks avoid (:func:`backends.launch.apply_rank_sched`). The same
  chain is timed again posted as the collectives post their steps, each receive one step
  ahead (:func:`chain_ahead`): the collectives' model prices its latencies by that one;
* **receive-ready notice** — gloo moves a message's bytes only once the receiver has posted
  its receive and said so (a "receive ready" notice back to the sender). Ranks 0 and 1 time,
  on the host's shared monotonic clock, a message to a receive posted early (send posted →
  receive done) and to one posted :data:`LATE_RECEIVE_S` after its send (receive posted →
  done); the difference of the medians is what the notice adds
  (:func:`ready_notice_step`, ``Cluster.host.ready_notice_s``). It is a few bytes handled by
  gloo's I/O threads: a few microseconds between two ranks with a core each, but tens of
  microseconds among four ranks on two cores, where the sender's I/O thread must first get a
  core;
* **posting** (LogP's *o*) — every rank posts an ``irecv`` from its partner (``r xor 1``) and an
  ``isend`` to it, back to back, and times the two calls alone (the waits follow, untimed);
  half the median is what one post costs a rank (:func:`post_pair`,
  ``Cluster.host.post_overhead_s``);
* **reduction** (γ) — ``a.add_(b)`` on float32 buffers, in every rank at once;
* **copy** — ``dst.copy_(src)``, in every rank at once;
* **compute** — a float32 matmul, in every rank at once (FLOP/s per rank);
* **stream one way** (loopback) — rank 0 sends each exchange size to rank 1 back to back,
  one way (OSU's bandwidth test beside the ping-pong's latency test;
  :func:`backends.collectives.point_to_point.stream`), timed in the same rounds as the
  ping-pong: each send is posted before rank 1 has posted its next receive, so gloo queues
  it, and the collectives' model weighs a queued message alone on the bus by it
  (``stream_times_s``, :func:`simulator.host.pingpong.stream_weights`);
* **send return** — TCP lets a blocking send return once the socket buffers hold what is
  still unread. On loopback rank 0 times, inside the ping-pong, how long each of its sends
  takes to return, by size (``send_return_times_s``). On a shaped network rank 0
  times a blocking send of a large message (:func:`send_buffer_probe_bytes`) to rank 1
  until it returns: S = n − B·t_return is the payload the send buffer holds
  (:func:`send_buffer_bytes`, ``Cluster.host.send_buffer_bytes``).

The exchanges, the chains and the posting are posted on the process group itself
(:func:`backends.collectives.comm.post_send`/``post_recv``), the way the collectives post
their steps: ``dist.isend`` adds a few microseconds of Python to every post, which with more
ranks than cores every rank waiting for a core pays again, so a chain posted through it
would price a step the collectives no longer take.

Rates are measured with all ``world_size`` ranks running together, so on a 2-core laptop with
4 ranks the cores' contention is in the numbers, under the scheduling policy the ranks run
under (recorded in the entry, ``rank_sched``). Every algorithm's prediction is derived from
these; none is ever fitted to the algorithm it predicts.
"""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from backends.primitives import (  # re-exported: Horovod's lab prices fused messages from it
    EXCHANGE_MIN_BYTES as EXCHANGE_MIN_BYTES,
)
from backends.primitives import measure_primitives, send_buffer_bytes, send_buffer_probe_bytes
from simulator.core.calibration import (
    CalibrationEntry,
    Fit,
    check_writable,
    exchange_flows,
    save_entry,
    this_host,
)
from simulator.core.calibration import (  # re-exported: the lab's fit, chapter 1's exercise
    fit_alpha_beta as fit_alpha_beta,
)

DEFAULT_SIZES = tuple(2**k for k in range(10, 27))  # 1 KiB … 64 MiB, ×2
QUICK_SIZES = tuple(2**k for k in range(10, 27, 2))  # 1 KiB … 64 MiB, ×4
DEFAULT_REPEATS = 40
QUICK_REPEATS = 15


def calibration_sweep(quick: bool = False) -> dict[str, Any]:
    """:func:`calibrate`'s sizes and repeats: the full sweep, or the quick one (``--quick``:
    every other size, fewer repeats) — one place for the CLI and for calibrating on first
    use to take them from."""
    if quick:
        return {"sizes": QUICK_SIZES, "repeats": QUICK_REPEATS}
    return {"sizes": DEFAULT_SIZES, "repeats": DEFAULT_REPEATS}


def link_fit(sizes: Sequence[float], times_s: Sequence[float]) -> Fit:
    """``t = α + n·β`` by ordinary least squares on the times themselves (α kept ≥ 0).

    The fit for a shaped network. There a message's time is the link's: 2 MiB take 175 ms at
    100 Mbit/s, α is some 100 µs, and the smallest messages are disturbed by TCP's state
    after a bulk transfer (seen: 1–8 KiB taking 1 ms right after 2 MiB, in every round of the
    interleaved sweep). The relative-error fit of the loopback calibration lets those few
    milliseconds pull β off by several per cent; absolute errors let the sizes that carry the
    bandwidth decide it. The relative residuals stay on record.
    """
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if n.shape != t.shape or n.size < 2:
        raise ValueError("need at least two (size, time) points of equal count")
    beta, alpha = np.polyfit(n, t, 1)
    if alpha < 0:
        alpha, beta = 0.0, float(np.sum(n * t) / np.sum(n * n))
    if beta <= 0:
        raise ValueError("the fitted bandwidth is not positive: are the times increasing?")
    residuals = tuple(float(x) for x in (alpha + n * beta - t) / t)
    return Fit(float(alpha), float(beta), residuals)


SHAPED_SWEEP_S = 0.25
"""On a shaped network the ping-pong sweep stops at the largest power of two that crosses the
slowest calibrated link in about this many seconds (2 MiB at 100 Mbit/s, 16 MiB at 1 Gbit/s)."""


def shaped_sizes(rates_bps: Sequence[int], sizes: Sequence[int] = DEFAULT_SIZES) -> list[int]:
    """The sizes of a shaped network's sweep: ``sizes`` up to :data:`SHAPED_SWEEP_S` of the
    slower of ranks 0 and 1's links (at least 256 KiB, so the fit sees the bandwidth). Steps
    of ×2, so that the concurrent-exchange fit (64 KiB up) has enough points for its
    intercept, the busy latency."""
    line_Bps = min(rates_bps[0], rates_bps[1 % len(rates_bps)]) / 8
    top = max(2**18, 2 ** int(np.log2(line_Bps * SHAPED_SWEEP_S)))
    return [n for n in sizes if n <= top]


def calibrate(world_size: int = 2, backend: str = "gloo", sizes: Sequence[int] = DEFAULT_SIZES,
              repeats: int = DEFAULT_REPEATS, path: str | Path | None = None,
              timeout: float = 60.0, network: str = "loopback",
              bandwidth: str | Sequence[str | int] | None = None,
              progress: bool = False) -> CalibrationEntry:
    """Measure the primitives with ``world_size`` ranks, save and return the entry.

    ``network="shaped"`` measures on the shaped network of :mod:`backends.shaped` with links
    of ``bandwidth`` (one rate or one per rank); the entry is keyed by that network
    (``shaped:1gbit``) beside the loopback one. There the default sweep is
    :func:`shaped_sizes` with at most 10 repeats (a 64 MiB ping-pong at 100 Mbit/s takes 11 s).
    ``progress``: name each group of primitives on stderr as it starts.
    """
    from backends.launch import spawn
    from simulator.core.shaped import key_rates, network_key, shift_flows

    if world_size < 2:
        raise ValueError(f"calibration needs at least 2 ranks (a ping-pong), got {world_size}")
    check_writable(path)  # a file that cannot take the entry fails now, not after measuring
    key = network_key(network, bandwidth)
    if key != "loopback" and tuple(sizes) in (DEFAULT_SIZES, QUICK_SIZES):
        sizes = shaped_sizes(key_rates(key))
        repeats = min(repeats, 10)
    sizes = sorted(set(sizes))
    if len(sizes) < 2:
        raise ValueError("calibration needs at least two message sizes to fit α and β")
    shaped = key != "loopback"
    probe = send_buffer_probe_bytes(key_rates(key)) if shaped else 0
    result = spawn(measure_primitives, world_size, sizes, repeats, shaped, probe, progress,
                   backend=backend, timeout=timeout, network=network, bandwidth=bandwidth)[0]
    fit = (fit_alpha_beta(sizes, result["p2p_times_s"]) if key == "loopback"
           else link_fit(sizes, result["p2p_times_s"]))
    ex_sizes, ex_times = result["exchange_sizes"], result["exchange_times_s"]
    bus, bus_latency = 0.0, 0.0
    if ex_sizes:
        flows = shift_flows(world_size) if shaped else exchange_flows(world_size)
        try:
            ex_fit = fit_alpha_beta([flows * n for n in ex_sizes], ex_times)
            bus, bus_latency = ex_fit.bandwidth_Bps, ex_fit.alpha_s
        except ValueError:  # too few or too noisy sizes for a line: the largest one alone
            bus = flows * ex_sizes[-1] / ex_times[-1]
    entry = CalibrationEntry(
        host=this_host(), backend=backend, world_size=world_size,
        latency_s=fit.alpha_s, bandwidth_Bps=fit.bandwidth_Bps,
        reduce_Bps=float(result["reduce_Bps"]), memcpy_Bps=float(result["memcpy_Bps"]),
        flops_per_s=float(result["flops_per_s"]), bus_bandwidth_Bps=bus,
        bus_latency_s=bus_latency,
        cores=os.cpu_count() or 1,
        p2p_sizes=list(sizes), p2p_times_s=list(result["p2p_times_s"]),
        fit_rel_residuals=list(fit.rel_residuals),
        exchange_sizes=list(ex_sizes), exchange_times_s=list(ex_times),
        shift_ahead_times_s=(list(result["shift_ahead_times_s"]) if key == "loopback"
                             else []),
        swap_ahead_times_s=(list(result["swap_ahead_times_s"]) if key == "loopback"
                            else []),
        reduce_ahead_times_s=(list(result["reduce_ahead_times_s"]) if key == "loopback"
                              else []),
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        torch_version=str(result["torch_version"]), network=key,
        chain_latency_s=list(result["chain_latency_s"]) if key == "loopback" else [],
        chain_ahead_latency_s=(list(result["chain_ahead_latency_s"]) if key == "loopback"
                               else []),
        send_buffer_bytes=(send_buffer_bytes(probe, float(result["send_return_s"]),
                                             fit.bandwidth_Bps) if shaped else None),
        send_return_times_s=[] if shaped else list(result["send_return_times_s"]),
        stream_times_s=list(result["stream_times_s"]),
        ready_notice_s=float(result["ready_notice_s"]),
        post_overhead_s=float(result["post_overhead_s"]),
        rank_sched=str(result["rank_sched"]))  # as the ranks really ran
    save_entry(entry, path)
    return entry


def describe_entry(e: CalibrationEntry) -> str:
    """One line of what a calibration entry measured (``distml-lab calibrate``'s output)."""
    worst = max((abs(r) for r in e.fit_rel_residuals), default=0.0)
    return (f"{e.key}: α = {e.latency_s * 1e6:.1f} µs, B = {e.bandwidth_Bps / 1e9:.2f} GB/s"
            f" (fit residuals ≤ {worst:.0%}), bus {e.bus_bandwidth_Bps / 1e9:.2f} GB/s with "
            f"busy α {e.bus_latency_s * 1e6:.0f} µs, reduce {e.reduce_Bps / 1e9:.2f} GB/s, "
            f"copy {e.memcpy_Bps / 1e9:.2f} GB/s, matmul {e.flops_per_s / 1e9:.1f} GFLOP/s"
            + _among_messages(e))


def _among_messages(entry: CalibrationEntry) -> str:
    """``, a 1 MiB reduction among messages … µs (γ·n …)``: the reducing shift's step less the
    shift's at the measured size nearest 1 MiB, beside what γ (16 MiB buffers, nothing else
    running) gives the same bytes (empty where not measured)."""
    pairs = list(zip(entry.exchange_sizes, entry.shift_ahead_times_s,
                     entry.reduce_ahead_times_s, strict=False))
    if not pairs:
        return ""
    n, shift_s, reducing_s = min(pairs, key=lambda t: abs(math.log2(t[0] / 2**20)))
    return (f", a {n / 2**20:g} MiB reduction among messages {(reducing_s - shift_s) * 1e6:.0f} "
            f"µs (γ·n {n / entry.reduce_Bps * 1e6:.0f} µs)")
