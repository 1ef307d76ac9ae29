"""Calibration: measure this machine's primitives and write the simulator's calibration file.

Only primitives are measured (DESIGN.md, "The lab"):

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
  (:func:`ready_notice_step`, ``Cluster.ready_notice_s``). It is a few bytes handled by
  gloo's I/O threads: a few microseconds between two ranks with a core each, but tens of
  microseconds among four ranks on two cores, where the sender's I/O thread must first get a
  core;
* **posting** (LogP's *o*) — every rank posts an ``irecv`` from its partner (``r xor 1``) and an
  ``isend`` to it, back to back, and times the two calls alone (the waits follow, untimed);
  half the median is what one post costs a rank (:func:`post_pair`,
  ``Cluster.post_overhead_s``);
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
  takes to return, by size (``send_return_times_s``): on the lab's host a send of up to
  16 KiB returned at about half of the one-way time, one of 32–512 KiB at 62–76 %, of
  1–4 MiB at 54–55 % and of 16 MiB at 97 %. On a shaped network rank 0
  times a blocking send of a large message (:func:`send_buffer_probe_bytes`) to rank 1
  until it returns: S = n − B·t_return is the payload the send buffer holds
  (:func:`send_buffer_bytes`, ``Cluster.send_buffer_bytes``).

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
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.core.calibration import (  # re-exported: the chain's message and length
    CHAIN_BYTES as CHAIN_BYTES,
)
from simulator.core.calibration import (
    CHAIN_STEPS as CHAIN_STEPS,
)
from simulator.core.calibration import (
    SHIFT_AHEAD_STEPS as SHIFT_AHEAD_STEPS,
)
from simulator.core.calibration import (
    SUSTAINED_REPEAT_S,
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

if TYPE_CHECKING:
    from backends.collectives.comm import Comm

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


EXCHANGE_MIN_BYTES = 2**16
"""Exchange sizes start here (bytes): large enough to be past the smallest-message effects,
small enough that the fit sees the exchanges' latency as well as their bandwidth."""


def pair_exchange(send: Any, recv: Any) -> None:
    """Send to the partner and receive from it at once (rank r pairs with r xor 1), the
    receive posted first, as the collectives post their steps."""
    import torch.distributed as dist

    from backends.collectives.comm import post_recv, post_send

    peer = dist.get_rank() ^ 1
    if peer < dist.get_world_size():
        for work in (post_recv(recv, peer), post_send(send, peer)):
            work.wait()


def shift_ahead(send: Any, slots: Any, steps: int = SHIFT_AHEAD_STEPS) -> None:
    """``steps`` steps of the ring's shift (send right, receive from the left; every rank at
    once; at world 2 the pair's exchange) posted as a ring posts its steps: the first receive
    is posted as the call starts, and each step sends, posts the next step's receive (into the
    other of the two rows of ``slots``), then waits for its own — so the left neighbour's next
    send finds its receive ready and waits for no notice. Its time divided by ``steps`` is one
    step. Unlike the pair's exchange, with three or more ranks each connection carries one
    direction only, as in a ring. It is :func:`chain_ahead` among all ranks, with the
    message and the steps of a collective's."""
    from backends.collectives.comm import Comm

    comm = Comm()  # found once a call, as a collective finds its team
    if comm.world_size >= 2:  # one rank alone has no one to send to
        _posted_ahead(comm, send, slots, comm.world_size, steps)


def swap_ahead(send: Any, slots: Any, steps: int = SHIFT_AHEAD_STEPS) -> None:
    """:func:`shift_ahead` between partners (rank r swaps with r xor 1, every pair at once; a
    rank without a partner stays out): the same messages posted the same way, but each
    connection carries both directions at once, as recursive doubling's do. Beside the shift
    it prices what a swap pays that a ring's one-way steps do not."""
    from backends.collectives.comm import Comm

    comm = Comm()
    peer = comm.rank ^ 1
    if peer < comm.world_size:
        _posted_ahead(comm, send, slots, None, steps)


def reduce_ahead(send: Any, slots: Any, acc: Any, steps: int = SHIFT_AHEAD_STEPS) -> None:
    """:func:`shift_ahead` whose every received message is reduced — ``acc.add_(row)``, the
    reduction γ prices, of the float32 bytes that just arrived — before the rank's next send
    is posted: the reduction primitive timed where the collectives run it, on bytes another
    core has just written while the ring's other messages are in flight. ``send`` and the two
    rows of ``slots`` are float32, ``acc`` one row's size. Less the shift of the same bytes,
    one step is what a reduction of a message costs there
    (:func:`simulator.host.reduction.reduction_times`). The send is a fixed buffer, not the
    sum: no collective is timed, only a message's reduction among messages."""
    from backends.collectives.comm import Comm

    comm = Comm()
    if comm.world_size >= 2:
        _posted_ahead(comm, send, slots, comm.world_size, steps, acc)


def _posted_ahead(comm: Comm, send: Any, slots: Any, k: int | None, steps: int,
                  acc: Any = None) -> None:
    """``steps`` steps of receive from the left and send to the right neighbour among ranks
    ``0 … k−1`` (``k`` None: both are the partner ``rank xor 1``), each receive after the
    first posted a step ahead (into the other row of ``slots``). Posted as the rings post
    (:meth:`backends.collectives.comm.Comm.isend` on the ``comm`` made for the call), with
    nothing but the loop between a receive's end and the next send: the one view a step cuts
    (the next row) is cut after the send is posted, as in
    :func:`backends.collectives.all_gather.ring_all_gather_chunks`. ``acc`` (not None): each
    received row is added into it as soon as it arrives, before the next send
    (:func:`reduce_ahead`)."""
    if steps < 1:
        return
    r = comm.rank
    left, right = (r ^ 1, r ^ 1) if k is None else ((r - 1) % k, (r + 1) % k)
    row = slots[0]
    ahead = comm.irecv(left, row)
    for step in range(steps):
        current, arrived = ahead, row
        sent = comm.isend(right, send)
        if step + 1 < steps:
            row = slots[(step + 1) % 2]
            ahead = comm.irecv(left, row)
        current.wait()
        if acc is not None:
            acc.add_(arrived)
        sent.wait()


def _shift(send: Any, recv: Any) -> None:
    """Receive from the left neighbour while sending to the right one (every rank at once; at
    world 2 the pair's exchange). The receive is posted first, as the collectives do."""
    import torch.distributed as dist

    from backends.collectives.comm import post_recv, post_send

    rank, world = dist.get_rank(), dist.get_world_size()
    for work in (post_recv(recv, (rank - 1) % world), post_send(send, (rank + 1) % world)):
        work.wait()


def chain_step(k: int, send: Any, recv: Any) -> None:
    """One step of the chain among ranks ``0 … k−1``: send right, receive from the left, wait
    for both (ranks ``≥ k`` stay out)."""
    import torch.distributed as dist

    from backends.collectives.comm import post_recv, post_send

    rank = dist.get_rank()
    if rank < k:
        for work in (post_recv(recv, (rank - 1) % k), post_send(send, (rank + 1) % k)):
            work.wait()


def chain_ahead(k: int, send: Any, slots: Any, steps: int = CHAIN_STEPS) -> None:
    """A whole chain of ``steps`` dependent steps among ranks ``0 … k−1``, posted as the
    collectives post theirs: each step sends right and waits for the receive from the left
    that was posted one step *earlier*, after posting the next one (into the other of the two
    rows of ``slots``) — so the left neighbour's next send finds its receive ready. Ranks
    ``≥ k`` stay out. Its time divided by ``steps`` is one step."""
    from backends.collectives.comm import Comm

    comm = Comm()
    if comm.rank < k:
        _posted_ahead(comm, send, slots, k, steps)


LATE_RECEIVE_S = 1e-3
"""How long after its send the late receive of the notice primitive is posted, s: far longer
than a small message takes, so the send is surely waiting for the notice (the receiving rank
spins meanwhile, staying on its core)."""


def ready_notice_step(buf: Any, stamps: Any, early: list[float], late: list[float]) -> None:
    """One sample of each half of the notice primitive (ranks 0 and 1; others stay out but
    join the barriers): ``early`` gets send-posted → receive-done of a receive posted before
    the send, ``late`` receive-posted → done of one posted :data:`LATE_RECEIVE_S` after it
    (both on rank 0, in s)."""
    import time

    import torch.distributed as dist

    rank = dist.get_rank()
    for posted_late in (False, True):
        stamps.zero_()
        pending = dist.irecv(buf, 0) if rank == 1 and not posted_late else None
        dist.barrier()
        if rank == 0:
            if not posted_late:  # the late half starts when rank 1 posts its receive
                stamps[0] = time.perf_counter()
            dist.send(buf, 1)
        elif rank == 1:
            if posted_late:
                until = time.perf_counter() + LATE_RECEIVE_S
                while time.perf_counter() < until:
                    pass
                stamps[0] = time.perf_counter()
                dist.recv(buf, 0)
            else:
                assert pending is not None
                pending.wait()
            stamps[1] = time.perf_counter()
        dist.all_reduce(stamps)  # rank 1's stamps reach rank 0 (the others add zeros)
        if rank == 0:
            (late if posted_late else early).append(float(stamps[1] - stamps[0]))


def post_pair(send: Any, recv: Any, times: list[float]) -> None:
    """Post a receive from the partner (``r xor 1``) and a send to it, time the two calls
    alone, then wait for both (a rank without a partner stays out)."""
    import time

    import torch.distributed as dist

    from backends.collectives.comm import post_recv, post_send

    peer = dist.get_rank() ^ 1
    if peer < dist.get_world_size():
        start = time.perf_counter()
        works = (post_recv(recv, peer), post_send(send, peer))
        times.append(time.perf_counter() - start)
        for work in works:
            work.wait()


SEND_BUFFER_PROBE_S = 0.6
"""On a shaped network the send-buffer probe's message crosses the calibrated link in about
this many seconds (8 MiB at 100 Mbit/s): well above any socket send buffer (Linux's default
``tcp_wmem`` maximum is 4 MiB, of which about half holds payload)."""


def send_buffer_probe_bytes(rates_bps: Sequence[int]) -> int:
    """The probe's message size: a power of two of about :data:`SEND_BUFFER_PROBE_S` on the
    slower of ranks 0 and 1's links, at least 8 MiB."""
    line_Bps = min(rates_bps[0], rates_bps[1 % len(rates_bps)]) / 8
    exponent: int = round(float(np.log2(line_Bps * SEND_BUFFER_PROBE_S)))
    return max(1 << 23, 1 << exponent)


def _send_return(send: Any, ack: Any, times: list[float]) -> None:
    """Rank 0 times how long a blocking ``send`` of a large message to rank 1 takes to
    *return*; rank 1 receives it and answers one byte, so each repeat starts with an empty
    socket buffer (other ranks stay out)."""
    import time

    import torch.distributed as dist

    rank = dist.get_rank()
    if rank == 0:
        start = time.perf_counter()
        dist.send(send, 1)
        times.append(time.perf_counter() - start)
        dist.recv(ack, 1)
    elif rank == 1:
        dist.recv(send, 0)
        dist.send(ack, 0)


def send_buffer_bytes(nbytes: int, return_s: float, bandwidth_Bps: float) -> float:
    """S: the bytes of an ``nbytes`` message still unsent when its blocking send returned
    after ``return_s`` seconds on a link of payload bandwidth ``bandwidth_Bps`` — the socket
    send buffer's payload capacity, S = n − B·t_return, within [0, n]."""
    return float(min(nbytes, max(0.0, nbytes - bandwidth_Bps * return_s)))


def measure_primitives(sizes: Sequence[int], repeats: int, shift: bool = False,
                       probe_bytes: int = 0) -> dict[str, object]:
    """Rank function (run under :func:`backends.launch.spawn`): every primitive, measured.

    ``shift``: the concurrent messages are the shaped network's shift (:func:`_shift`)
    instead of the pairwise exchange. ``probe_bytes`` > 0: also time a blocking send of that
    many bytes until it returns (:func:`_send_return`), median over ``min(repeats, 5)``."""
    import torch
    import torch.distributed as dist

    from backends.collectives.point_to_point import ping_pong, stream
    from backends.launch import current_rank_sched
    from backends.measure import measure, measure_many

    world = dist.get_world_size()
    bufs = [torch.zeros(nbytes, dtype=torch.uint8) for nbytes in sizes]
    big = [b for b in bufs if b.numel() >= EXCHANGE_MIN_BYTES]
    # the ping-pong (rank 0 timing its sends' returns), and on loopback the stream one way
    # of the exchanges' sizes beside it
    sent: list[list[float]] = [[] for _ in bufs]
    streams = [] if shift else [functools.partial(stream, b) for b in big]
    timings = measure_many([functools.partial(ping_pong, buf, returns=r)
                            for buf, r in zip(bufs, sent, strict=True)] + streams,
                           repeats=repeats, repeat_s=SUSTAINED_REPEAT_S)
    timings, stream_t = timings[:len(bufs)], timings[len(bufs):]
    p2p = [t.median_s / 2 for t in timings]
    spare = [torch.empty_like(b) for b in big]
    pairs = zip(big, spare, strict=True)
    swaps = [functools.partial(_shift if shift else pair_exchange, b, s) for b, s in pairs]
    # the same sizes round the ring, and (three ranks or more: at two the shift is the swap)
    # between partners, posted ahead, in the same rounds
    ahead_kinds = [] if shift else [shift_ahead] + ([swap_ahead] if world > 2 else [])
    swaps += [functools.partial(kind, b, torch.empty(2, b.numel(), dtype=torch.uint8))
              for kind in ahead_kinds for b in big]
    # and round the ring again, each message reduced as it arrives (float32, as γ is)
    reducing = [] if shift else big
    swaps += [functools.partial(reduce_ahead, torch.ones(b.numel() // 4),
                                torch.empty(2, b.numel() // 4), torch.zeros(b.numel() // 4))
              for b in reducing]
    exchange = measure_many(swaps, repeats=repeats, repeat_s=SUSTAINED_REPEAT_S)
    blocks = [exchange[k * len(big):(k + 1) * len(big)] for k in range(1 + len(ahead_kinds))]
    blocks += [[]] * (3 - len(blocks))  # no shift (shaped) or no swap (two ranks)
    reduce_ahead_t = exchange[(1 + len(ahead_kinds)) * len(big):]
    exchange, shift_ahead_t, swap_ahead_t = blocks
    del swaps, spare

    token, slot = torch.zeros(CHAIN_BYTES, dtype=torch.uint8), torch.empty(CHAIN_BYTES,
                                                                          dtype=torch.uint8)
    chain = measure_many([functools.partial(chain_step, k, token, slot)
                          for k in range(2, world + 1)], repeats=repeats, inner=CHAIN_STEPS)
    slots = torch.empty(2, CHAIN_BYTES, dtype=torch.uint8)
    ahead = [] if shift else measure_many([functools.partial(chain_ahead, k, token, slots)
                                           for k in range(2, world + 1)],
                                          repeats=repeats, inner=1)

    stamps = torch.zeros(2, dtype=torch.float64)
    early: list[float] = []
    late: list[float] = []
    for _ in range(repeats):
        ready_notice_step(token, stamps, early, late)
    notice_s = max(0.0, float(np.median(late) - np.median(early))) if early else 0.0
    posts: list[float] = []
    for _ in range(repeats):
        dist.barrier()
        post_pair(token, slot, posts)
    post_s = float(np.median(posts)) / 2 if posts else 0.0

    send_return_s = 0.0
    if probe_bytes > 0:
        probe, ack = torch.zeros(probe_bytes, dtype=torch.uint8), torch.zeros(1,
                                                                               dtype=torch.uint8)
        returns: list[float] = []
        for _ in range(min(repeats, 5)):
            _send_return(probe, ack, returns)
        send_return_s = float(np.median(returns)) if returns else 0.0

    elems = 4 * 2**20  # 16 MiB of float32: larger than the caches, like a gradient bucket
    a, b = torch.rand(elems), torch.rand(elems)
    reduce_s = measure(lambda: a.add_(b), repeats=repeats).median_s
    copy_s = measure(lambda: a.copy_(b), repeats=repeats).median_s
    m = 256
    x, y = torch.rand(m, m), torch.rand(m, m)
    mm_s = measure(lambda: torch.mm(x, y), repeats=repeats).median_s
    return {"world_size": world, "p2p_times_s": p2p,
            "exchange_sizes": [b.numel() for b in big],
            "exchange_times_s": [t.median_s for t in exchange],
            "shift_ahead_times_s": [t.median_s / SHIFT_AHEAD_STEPS
                                    for t in shift_ahead_t],
            "swap_ahead_times_s": [t.median_s / SHIFT_AHEAD_STEPS for t in swap_ahead_t],
            "reduce_ahead_times_s": [t.median_s / SHIFT_AHEAD_STEPS for t in reduce_ahead_t],
            "stream_times_s": [t.median_s for t in stream_t],
            "send_return_times_s": [float(np.median(r)) if r else 0.0 for r in sent],
            "chain_latency_s": [t.median_s for t in chain],
            "chain_ahead_latency_s": [t.median_s / CHAIN_STEPS for t in ahead],
            "reduce_Bps": 4 * elems / reduce_s,
            "memcpy_Bps": 4 * elems / copy_s, "flops_per_s": 2 * m**3 / mm_s,
            "send_return_s": send_return_s, "ready_notice_s": notice_s,
            "post_overhead_s": post_s, "rank_sched": current_rank_sched(),
            "torch_version": torch.__version__}


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
              bandwidth: str | Sequence[str | int] | None = None) -> CalibrationEntry:
    """Measure the primitives with ``world_size`` ranks, save and return the entry.

    ``network="shaped"`` measures on the shaped network of :mod:`backends.shaped` with links
    of ``bandwidth`` (one rate or one per rank); the entry is keyed by that network
    (``shaped:1gbit``) beside the loopback one. There the default sweep is
    :func:`shaped_sizes` with at most 10 repeats (a 64 MiB ping-pong at 100 Mbit/s takes 11 s).
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
    result = spawn(measure_primitives, world_size, sizes, repeats, shaped, probe,
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
