"""RPC model parallelism measured: the rank programs of the RPC lab (book chapter 13), run under
:func:`backends.launch.spawn`, one process per rank, each inside RPC (:func:`backends.rpc.
init_rpc` … :func:`backends.rpc.shutdown`).

* :func:`echo_sweep` — the RPC transport's one-way time per message size: rank 0 echoes a
  tensor off rank 1 (``rpc_sync`` of :func:`echo`), a primitive like the process group's
  ping-pong;
* :func:`train_timed` — the split model (:class:`backends.rpc.SplitModel`, a stage per worker)
  trained from rank 0, every step timed.

Units: seconds, bytes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
from torch import nn

from backends.device import device
from backends.rpc import SplitModel, init_rpc, shutdown, train_split, worker_name


def echo(t: torch.Tensor) -> torch.Tensor:
    """The remote end of an echo: returns its tensor argument (sent back whole)."""
    return t


def echo_sweep(sizes: Sequence[int], repeats: int, idle_s: float) -> list[float] | None:
    """Rank program: rank 0 echoes each size (bytes) off rank 1, ``idle_s`` apart (untimed);
    one-way median time per size, s (``None`` on the other ranks, which only serve)."""
    init_rpc()
    try:
        if dist.get_rank() != 0:
            return None
        out = []
        for n in sizes:
            buf = torch.zeros(max(n // 4, 1), device=device())
            samples = []
            for k in range(3 + repeats):
                time.sleep(idle_s)
                start = time.perf_counter()
                rpc.rpc_sync(worker_name(1), echo, args=(buf,))
                if k >= 3:
                    samples.append((time.perf_counter() - start) / 2)
            out.append(statistics.median(samples))
        return out
    finally:
        shutdown()


def train_timed(factories: Sequence[Callable[[], nn.Module]], widths: Sequence[int],
                batch: int, repeats: int) -> list[float] | None:
    """Rank program: rank 0 trains the split model of ``factories`` (stage ``i`` on worker
    ``i + 1``) on ``batch`` rows of ``widths[0]`` features, targets of ``widths[-1]``; every
    step timed after 2 warm-ups, s (``None`` on the workers)."""
    init_rpc()
    try:
        if dist.get_rank() != 0:
            return None
        model = SplitModel(list(factories), list(range(1, len(factories) + 1)))
        g = torch.Generator().manual_seed(0)
        data = [(torch.randn(batch, widths[0], generator=g),
                 torch.randn(batch, widths[-1], generator=g))]
        samples: list[float] = []
        train_split(model, data * (2 + repeats), step_times=samples)
        return samples[2:]
    finally:
        shutdown()
