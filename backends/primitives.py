"""The calibration's primitives, as rank code: what each rank runs while the lab measures this
machine (:mod:`lab.calibrate` launches them and writes the calibration file).

Each function runs inside a rank of a process group (:func:`backends.launch.spawn`):

* :func:`pair_exchange` — the concurrent exchange (rank ``r`` swaps with ``r xor 1``);
* :func:`shift_ahead`, :func:`swap_ahead`, :func:`reduce_ahead` — the ring's shift, the
  partners' swap and the reducing shift, each receive posted a step ahead as the collectives
  post their steps;
* :func:`chain_step`, :func:`chain_ahead` — the chain of dependent exchanges, plain and
  posted ahead;
* :func:`ready_notice_step` — gloo's receive-ready notice, timed on the shared clock;
* :func:`post_pair` — the cost of posting a send and a receive (LogP's *o*);
* :func:`measure_primitives` — the whole sweep: ping-pong, the above, reduction, copy, matmul,
  stream and send returns; rank 0 returns the medians.

The simulated twins of these primitives live in :mod:`simulator.host`; what each measures and
why is told in :mod:`lab.calibrate`. Times are seconds, sizes bytes.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.core.calibration import (
    CHAIN_BYTES,
    CHAIN_STEPS,
    SHIFT_AHEAD_STEPS,
    SUSTAINED_REPEAT_S,
)

if TYPE_CHECKING:
    from backends.collectives.comm import Comm


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
                       probe_bytes: int = 0, progress: bool = False) -> dict[str, object]:
    """Rank function (run under :func:`backends.launch.spawn`): every primitive, measured.

    ``shift``: the concurrent messages are the shaped network's shift (:func:`_shift`)
    instead of the pairwise exchange. ``probe_bytes`` > 0: also time a blocking send of that
    many bytes until it returns (:func:`_send_return`), median over ``min(repeats, 5)``.
    ``progress``: rank 0 names each group of primitives on stderr as it starts."""
    import torch
    import torch.distributed as dist

    from backends.collectives.point_to_point import ping_pong, stream
    from backends.launch import current_rank_sched
    from backends.measure import measure, measure_many

    world = dist.get_world_size()
    steps = iter(["ping-pong and stream one way", "concurrent exchanges, shift and swap",
                  "chains of dependent messages", "receive-ready notice and posting",
                  "reduction, copy and matmul"])

    def step() -> None:
        if progress and dist.get_rank() == 0:
            print(f"  [{world} ranks] {next(steps)} ...", file=sys.stderr, flush=True)

    step()
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
    step()
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

    step()
    token, slot = torch.zeros(CHAIN_BYTES, dtype=torch.uint8), torch.empty(CHAIN_BYTES,
                                                                          dtype=torch.uint8)
    chain = measure_many([functools.partial(chain_step, k, token, slot)
                          for k in range(2, world + 1)], repeats=repeats, inner=CHAIN_STEPS)
    slots = torch.empty(2, CHAIN_BYTES, dtype=torch.uint8)
    ahead = [] if shift else measure_many([functools.partial(chain_ahead, k, token, slots)
                                           for k in range(2, world + 1)],
                                          repeats=repeats, inner=1)

    step()
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

    step()
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
