"""Rank functions of the shaped-network tests (module level, so spawn can pickle them)."""

from __future__ import annotations

import os
import socket
import time
from typing import Any


def where_am_i() -> dict[str, Any]:
    """This rank's view: its rank, pid, and the addresses of its network namespace."""
    import torch.distributed as dist

    addrs = sorted(name for _, name in socket.if_nameindex())
    return {"rank": dist.get_rank(), "pid": os.getpid(), "ifaces": addrs,
            "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME")}


def timed_send(nbytes: int, repeats: int = 1) -> float:
    """Rank 0 sends ``nbytes`` to rank 1 (after a barrier); the receiver's elapsed time, s."""
    import torch
    import torch.distributed as dist

    buf = torch.zeros(nbytes, dtype=torch.uint8)
    best = float("inf")
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        if dist.get_rank() == 0:
            dist.send(buf, 1)
        elif dist.get_rank() == 1:
            dist.recv(buf, 0)
        best = min(best, time.perf_counter() - start)
    return best


def fail_on_rank(bad: int) -> int:
    """Rank ``bad`` raises; the others wait in a collective (and fail when it is gone)."""
    import torch
    import torch.distributed as dist

    if dist.get_rank() == bad:
        raise RuntimeError(f"rank {bad} fails on purpose")
    t = torch.zeros(4)
    dist.all_reduce(t)
    return dist.get_rank()


def block_forever(marker: str) -> None:
    """Every rank writes its pid to ``marker.<rank>`` and then sleeps (to be interrupted)."""
    import torch.distributed as dist

    with open(f"{marker}.{dist.get_rank()}", "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(600)


def ping_pong_sweep(sizes: list[int], repeats: int = 20) -> list[float]:
    """Median one-way time of a 0 ↔ 1 ping-pong at each size, s (rank 0's view)."""
    import statistics

    import torch
    import torch.distributed as dist

    out = []
    for n in sizes:
        buf = torch.zeros(n, dtype=torch.uint8)
        samples = []
        for _ in range(repeats):
            dist.barrier()
            start = time.perf_counter()
            if dist.get_rank() == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            elif dist.get_rank() == 1:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            samples.append((time.perf_counter() - start) / 2)
        out.append(statistics.median(samples))
    return out


def ring_shift(nbytes: int, repeats: int = 5) -> float:
    """Every rank sends ``nbytes`` to its right neighbour while receiving from its left;
    the median time of one such step, s."""
    import statistics

    import torch
    import torch.distributed as dist

    p, r = dist.get_world_size(), dist.get_rank()
    out, inc = torch.zeros(nbytes, dtype=torch.uint8), torch.zeros(nbytes, dtype=torch.uint8)
    samples = []
    for _ in range(repeats + 1):
        dist.barrier()
        start = time.perf_counter()
        req = dist.isend(out, (r + 1) % p)
        dist.recv(inc, (r - 1) % p)
        req.wait()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples[1:])
