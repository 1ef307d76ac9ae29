"""How much of a collective's time the ranks' CPU fills, with more ranks than cores (book §2.5).

    .venv/bin/python benchmarks/cpu_share.py [--world 4] [--calls 30] [--out benchmarks/results]

One launch of ``world`` ranks; for each of the four algorithms of the accuracy sweep (ring and
recursive-doubling all-reduce, ring all-gather, binomial broadcast) and float32 buffers of
64 KiB … 4 MiB, every rank runs ``calls`` calls back to back and records their wall time and
its process CPU time (``time.process_time``: every thread of the rank, gloo's I/O thread
included). Reports, per point, the wall time per call (the slowest rank's) and the ranks'
summed CPU per call divided by the host's cores: the time the calls would take if the cores
did nothing else and were never idle. Where that ``cpu_share`` is close to 1 the collective is
*CPU-bound*: its time is the CPU all ranks need, shared out over too few cores, and every
microsecond of a rank's Python or copying is paid again by the ranks waiting for a core — the
oversubscription the α-β-γ model does not have. Writes ``cpu_share-<run id>.json``/``.csv`` (new
files every run: ``_output.py``) and prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from backends.collectives.all_gather import ring_all_gather
from backends.collectives.all_reduce import recursive_doubling_all_reduce, ring_all_reduce
from backends.collectives.broadcast import binomial_broadcast
from backends.launch import spawn

from _output import add_out, write_records

SIZES = [2**k for k in range(16, 23, 2)]
"""Buffer sizes, bytes: 64 KiB … 4 MiB."""
WARMUP = 3


def _calls(nbytes: int, world: int) -> dict[str, Callable[[], None]]:
    """The four algorithms on float32 buffers of ``nbytes`` (all-gather: ``nbytes`` gathered)."""
    count = nbytes // 4 // world * world
    buf, out, piece = torch.zeros(count), torch.zeros(count), torch.zeros(count // world)
    return {"all_reduce.ring": lambda: ring_all_reduce(buf),
            "all_reduce.recursive_doubling": lambda: recursive_doubling_all_reduce(buf),
            "all_gather.ring": lambda: ring_all_gather(out, piece),
            "broadcast.binomial": lambda: binomial_broadcast(buf, 0)}


def cpu_and_wall(sizes: list[int], calls: int) -> list[dict[str, Any]]:
    """Rank function: this rank's CPU and wall time per call for every algorithm and size, s."""
    import torch.distributed as dist

    rows = []
    for nbytes in sizes:
        for name, call in _calls(nbytes, dist.get_world_size()).items():
            for _ in range(WARMUP):
                call()
            dist.barrier()
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(calls):
                call()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            dist.barrier()
            rows.append({"twin": name, "bytes": nbytes, "cpu_s": cpu / calls,
                         "wall_s": wall / calls})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--calls", type=int, default=30)
    add_out(parser)
    args = parser.parse_args()
    if args.world < 2 or args.calls < 1:
        parser.error("need --world of at least 2 and --calls of at least 1")
    cores = os.cpu_count() or 1
    per_rank = spawn(cpu_and_wall, args.world, SIZES, args.calls, timeout=300)
    records = []
    print(f"{'algorithm':<30} {'size(B)':>9} {'wall(us)':>9} {'CPU/cores(us)':>13} "
          f"{'cpu_share':>9}")
    for i, point in enumerate(per_rank[0]):
        wall = max(rows[i]["wall_s"] for rows in per_rank)
        busy = sum(rows[i]["cpu_s"] for rows in per_rank) / cores
        record = {"twin": point["twin"], "world": args.world, "cores": cores,
                  "bytes": point["bytes"], "wall_s": wall, "cpu_over_cores_s": busy,
                  "cpu_share": busy / wall}
        records.append(record)
        print(f"{record['twin']:<30} {record['bytes']:>9} {wall * 1e6:>9.0f} "
              f"{busy * 1e6:>13.0f} {record['cpu_share']:>9.2f}")
    write_records(records, args.out, "cpu_share")


if __name__ == "__main__":
    main()
