"""What a cluster file needs, measured on the ranks of a real process group (gloo or NCCL).

The simulator's presets describe clusters from their data sheets; a *cluster file*
(:mod:`simulator.core.cluster_file`) describes the one the lab ran on, from measurements of
primitives — never of the algorithms it will predict:

* **point-to-point** one-way times by size between a pair of ranks on one node, and between a
  pair on two nodes where the world spans several (ping-pong, ``send``/``recv``), which the lab
  fits to α and β per level;
* **all-reduce** time by size with the backend's own collective (``dist.all_reduce``: NCCL's
  or gloo's), reported as nccl-tests' bus bandwidth — what a textbook cost model is checked on;
* **GEMM throughput** by shape ``(M, N, K)`` and dtype on this rank's device
  (:func:`backends.device.device`: the GPU under NCCL), FLOP/s ``2·M·N·K / t``;
* **memory bandwidth** of the device: a large copy, bytes read plus written per second.

Every rank calls :func:`probe_rank` (through :func:`backends.launch.spawn`, or on torchrun's
ranks); rank 0 returns the measurements, the others ``None``. Seconds, bytes, FLOP/s.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from backends.device import device
from backends.measure import measure, median_time

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _ping_pong(peer_a: int, peer_b: int, nbytes: int, repeats: int) -> float:
    """One-way time of ``nbytes`` between two ranks (half a round trip), s; every rank calls
    it, the others only meet the barriers."""
    rank = dist.get_rank()
    buf = torch.zeros(max(1, nbytes), dtype=torch.uint8, device=device())

    def round_trip() -> None:
        if rank == peer_a:
            dist.send(buf, peer_b)
            dist.recv(buf, peer_b)
        elif rank == peer_b:
            dist.recv(buf, peer_a)
            dist.send(buf, peer_a)

    return measure(round_trip, repeats=repeats, inner=1).median_s / 2


def _gemm_rate(m: int, n: int, k: int, dtype: str, repeats: int) -> tuple[float, str]:
    """FLOP/s of one ``(M×K)·(K×N)`` product on this rank's device, and the dtype it ran in
    (half precision runs in fp32 on a CPU)."""
    dev = device()
    if dev.type == "cpu" and dtype == "fp16":  # no fast half-precision GEMM on a CPU
        dtype = "fp32"
    a = torch.randn(m, k, device=dev).to(DTYPES[dtype])
    b = torch.randn(k, n, device=dev).to(DTYPES[dtype])
    seconds = median_time(lambda: torch.matmul(a, b), repeats=repeats)
    return 2.0 * m * n * k / seconds, dtype


def _copy_Bps(nbytes: int, repeats: int) -> float:
    """Bytes read plus written per second by one large copy on this rank's device."""
    src = torch.ones(nbytes // 4, device=device())
    dst = torch.empty_like(src)
    return 2.0 * src.numel() * 4 / median_time(lambda: dst.copy_(src), repeats=repeats)


def probe_rank(p2p_sizes: Sequence[int], all_reduce_sizes: Sequence[int],
               gemm_shapes: Sequence[tuple[int, int, int, str]], copy_bytes: int,
               repeats: int) -> dict[str, Any] | None:
    """Measure every primitive of a cluster file (call on every rank).

    Returns, on rank 0: ``ranks_per_node``, ``intra`` and ``inter`` (one-way seconds per size
    of ``p2p_sizes``, ``inter`` empty on one node), ``all_reduce`` (seconds per size of
    ``all_reduce_sizes``), ``gemm`` ((FLOP/s, dtype run) per shape, on rank 0's device),
    ``copy_Bps``, ``device`` (its name), ``memory_bytes``, ``backend`` and ``world``;
    ``None`` on the other ranks.
    """
    world, rank = dist.get_world_size(), dist.get_rank()
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    intra = ([_ping_pong(0, 1, n, repeats) for n in p2p_sizes] if per_node >= 2 else [])
    inter = ([_ping_pong(0, per_node, n, repeats) for n in p2p_sizes]
             if world > per_node else [])
    reduced = []
    for n in all_reduce_sizes:
        buf = torch.zeros(max(1, n // 4), device=device())

        def all_reduce(b: torch.Tensor = buf) -> None:
            dist.all_reduce(b)

        reduced.append(measure(all_reduce, repeats=repeats).median_s)
    if rank != 0:
        dist.barrier()  # rank 0 times its device alone
        return None
    gemm = [_gemm_rate(m, n, k, dt, repeats) for m, n, k, dt in gemm_shapes]
    copy = _copy_Bps(copy_bytes, repeats)
    dev = device()
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
        memory = float(torch.cuda.get_device_properties(dev).total_memory)
    else:
        name = "cpu"
        memory = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    dist.barrier()
    return {"ranks_per_node": per_node, "intra": intra, "inter": inter,
            "all_reduce": reduced, "gemm": gemm, "copy_Bps": copy, "device": name,
            "memory_bytes": memory, "backend": str(dist.get_backend()), "world": world}
