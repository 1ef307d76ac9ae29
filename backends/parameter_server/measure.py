"""The van's messages measured: the rank programs behind the parameter-server lab's van link
(book chapter 3, PS-Lite's van), run under :func:`backends.launch.spawn`, one process per rank.

On loopback moving a message is work of the host's cores, so these time the van's own pattern
from ``k`` senders to one node (the fan-in a server or a worker has):

* :func:`anysource_ping_pong` — what a receive from any source costs more than a named one, s;
* :func:`app_echo` — a request and its echo through this package's own van, customer and app
  (:class:`~backends.parameter_server.kv_app.SimpleApp`), the CPU seconds per one-way message;
* :func:`van_echo` (:func:`van_echo_all` for several fan-ins) — the same with bare gloo sends
  shaped as the van's.

Units: seconds (CPU seconds where said), bytes.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any


def anysource_ping_pong(repeats: int = 9, rounds: int = 100) -> tuple[float, float]:
    """Rank function: ranks 0 and 1 ping-pong a header, receiving from a named source, then
    from any source, the two interleaved repeat by repeat so that a noisy moment spoils both
    alike; the other ranks wait. Returns half the named round trip (median) and that plus the
    median of the repeats' differences, s."""
    import torch
    import torch.distributed as dist

    from simulator.parameter_server import HEADER_FIELDS

    rank = dist.get_rank()
    header = torch.zeros(HEADER_FIELDS, dtype=torch.int64)
    plain, extra = [], []
    for _ in range(repeats + 1):
        pair = []
        for anysource in (False, True):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(rounds if rank < 2 else 0):
                if rank == 0:
                    dist.send(header, 1)
                    dist.recv(header, None if anysource else 1)
                else:
                    dist.recv(header, None if anysource else 0)
                    dist.send(header, 0)
            pair.append((time.perf_counter() - start) / rounds / 2)
        plain.append(pair[0])
        extra.append(pair[1] - pair[0])
    named = statistics.median(plain[1:])
    return named, named + statistics.median(extra[1:])


VAN_PAYLOAD_SIZES = (0, 4096, 16384, 65536)
"""Payload bytes of the van echo (0: a header alone). The PS messages of this lab are a
112-byte header and payloads of a few KiB."""


def van_echo(fan_in: int, payloads: tuple[int, ...] = VAN_PAYLOAD_SIZES,
             rounds: int = 300, repeats: int = 5) -> list[float]:
    """Rank function: ``fan_in`` senders (ranks ``2 … 1+k``) each send rank 1 a message shaped
    as the van sends it — a header, received *from any source*, then a payload of ``n`` bytes
    from the header's sender (none for ``n = 0``) — and rank 1 echoes it back; each sender
    receives the echo on a receiving thread and hands it to its sending thread, as a van does.
    The other ranks of the world wait, as a run's idle nodes do.

    Returns, per payload size, this rank's CPU seconds (user + system, all its threads) per
    one-way message, the median over ``repeats`` of ``rounds`` round trips per sender (0 on
    the ranks that take no part). On loopback a message is work of the host's cores — the
    socket copies, gloo's loop thread, the thread wake-ups — and with several senders a
    message often arrives before its receive is posted, which costs more.
    """
    import torch
    import torch.distributed as dist

    from simulator.parameter_server import HEADER_FIELDS

    rank = dist.get_rank()
    active = 1 <= rank < 2 + fan_in
    per_round = max(rounds // repeats, 1)
    out = []
    for n in payloads:
        header = torch.zeros(HEADER_FIELDS, dtype=torch.int64)
        payload = torch.zeros(max(n, 1), dtype=torch.uint8)
        samples = []
        for _ in range(repeats):
            dist.barrier()
            cpu = time.process_time()
            if rank == 1:
                for _ in range(per_round * fan_in):
                    src = dist.recv(header, None, tag=1)
                    if n:
                        dist.recv(payload, src, tag=2)
                    dist.send(header, src, tag=3)
                    if n:
                        dist.send(payload, src, tag=4)
            elif active:
                _echo_sender(header, payload, n, per_round)
            samples.append((time.process_time() - cpu) / (2 * per_round * fan_in)
                           if active else 0.0)
        out.append(statistics.median(samples))
    return out


def _echo_sender(header: Any, payload: Any, n: int, rounds: int) -> None:
    """A sender of :func:`van_echo`: sends on this thread, receives on another."""
    import torch
    import torch.distributed as dist

    got, cond = [0], threading.Condition()
    back_h, back_p = torch.empty_like(header), torch.empty_like(payload)

    def receiving() -> None:
        for _ in range(rounds):
            dist.recv(back_h, None, tag=3)
            if n:
                dist.recv(back_p, 1, tag=4)
            with cond:
                got[0] += 1
                cond.notify()

    thread = threading.Thread(target=receiving, daemon=True)
    thread.start()
    for i in range(rounds):
        dist.send(header, 1, tag=1)
        if n:
            dist.send(payload, 1, tag=2)
        with cond:
            while got[0] <= i:
                cond.wait(1.0)
    thread.join()


def app_echo(fan_ins: tuple[int, ...], rounds: int = 300,
             payloads: tuple[int, ...] = VAN_PAYLOAD_SIZES, repeats: int = 5
             ) -> list[list[float]]:
    """Rank function: the van's request–response round trip, through this package's
    own transport and app layer (PS-Lite's ``SimpleApp``), from ``k`` senders to one node.

    The world is a postoffice of one server (rank 1) and ``world − 2`` workers; the server's
    request handle answers each request with its own values (an echo). For each fan-in ``k``
    and payload of ``n`` bytes (0: a header alone), workers ``0 … k−1`` each send requests of
    ``n`` bytes and wait for the answer (:meth:`SimpleApp.wait`), one at a time; the others
    idle, as a run's idle nodes do. So every message is what a training run's is — a header
    coded and received from any source by the van's receiving thread, its payload, the
    customer's bookkeeping, a waiting thread woken — with no training in it.

    Returns, per fan-in and payload size, this rank's CPU seconds (user + system, all its
    threads) per one-way message, the median over ``repeats`` of ``rounds // repeats`` round
    trips per sender (0 on the ranks that take no part): the server's from the barrier until
    it has answered every request, a sender's until its last answer came back.
    """
    import torch
    import torch.distributed as dist

    from backends.parameter_server.kv_app import SimpleApp
    from backends.parameter_server.message import Message
    from backends.parameter_server.postoffice import ALL_GROUPS, Postoffice

    po = Postoffice(1, dist.get_world_size() - 2, 1, timeout_s=60.0)
    app = SimpleApp(0, po)
    answered, cond = [0], threading.Condition()

    def echo(msg: Message, server: SimpleApp) -> None:
        server.response(msg, msg.vals if msg.meta.nvals else None)
        with cond:
            answered[0] += 1
            cond.notify()

    app.request_handle = echo
    po.start()
    per_round = max(rounds // repeats, 1)
    out: list[list[float]] = []
    for k in fan_ins:
        active = po.is_server or (po.is_worker and po.my_rank < k)
        row = []
        for n in payloads:
            vals = torch.zeros(n // 4) if n else None
            samples = []
            for _ in range(repeats):
                with cond:
                    answered[0] = 0
                po.barrier(ALL_GROUPS)
                cpu = time.process_time()
                if po.is_server:
                    with cond:
                        while answered[0] < per_round * k:
                            cond.wait(1.0)
                elif active:
                    for _ in range(per_round):
                        app.wait(app.request([1], vals))
                samples.append((time.process_time() - cpu) / (2 * per_round * k)
                               if active else 0.0)
            row.append(statistics.median(samples))
        out.append(row)
    po.finalize()
    return out


def van_echo_all(fan_ins: tuple[int, ...], rounds: int) -> list[list[float]]:
    """Rank function: :func:`van_echo` at each fan-in, in one launch."""
    return [van_echo(k, rounds=rounds) for k in fan_ins]
