"""Where a ring all-reduce's time goes: its messages alone, then with the reductions (book §2.5).

    .venv/bin/python benchmarks/ring_bare.py [--world 4] [--out benchmarks/results]

One launch of ``world`` ranks; for float32 buffers of 64 KiB … 4 MiB, three programs are timed
side by side, repeats interleaved, each run ``calls`` times back to back:

* ``ring`` — :func:`backends.collectives.all_reduce.ring_all_reduce` itself;
* ``bare`` — the same messages in the same order, posted the same way (the ring's receive of
  the next step posted before the current step is waited for, on the process group directly
  through :func:`~backends.collectives.comm.post_send`/``post_recv``) with no reduction and as
  little Python as a loop allows;
* ``bare+reduce`` — ``bare`` with the reduce-scatter's reductions put back.

Reports per program the wall time per call (the slowest rank's median) and each rank's process
CPU per call (``time.process_time``, gloo's I/O thread included), mean over ranks. The gap
between ``bare`` and ``ring`` is the algorithm's own Python and reductions; the gap between
``bare`` and the model's prediction for the ring is in the messages themselves
(benchmarks/NOTES.md, "The model's own ping-pong"). Writes ``ring_bare-<run id>.json`` (a new
file every run: ``_output.py``); asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from backends.launch import spawn

from _output import add_out, write_json

SIZES = [2**k for k in range(16, 23, 2)]
"""Buffer sizes, bytes: 64 KiB … 4 MiB."""
REPEATS = 9


def _programs(nbytes: int) -> dict[str, Callable[[], None]]:
    import torch.distributed as dist

    from backends.collectives.all_reduce import ring_all_reduce
    from backends.collectives.comm import post_recv, post_send

    r, p = dist.get_rank(), dist.get_world_size()
    x = torch.rand(nbytes // 4 // p * p)
    n = x.numel() // p
    right, left = (r + 1) % p, (r - 1) % p
    rows = torch.empty(2, n)

    def bare(reduce: bool) -> None:
        # step s of a phase sends chunk r − s − 1 (+1 in the all-gather) and receives the
        # chunk before it from the left, the next step's receive posted ahead
        for phase in (0, 1):
            ahead = post_recv(rows[0], left)
            for s in range(p - 1):
                current = ahead
                sent = post_send(x[(r - s - 1 + phase) % p * n:][:n], right)
                if s + 1 < p - 1:
                    ahead = post_recv(rows[(s + 1) % 2], left)
                current.wait()
                sent.wait()
                if reduce and phase == 0:
                    x[(r - s - 2) % p * n:][:n].add_(rows[s % 2])

    return {"ring": lambda: ring_all_reduce(x), "bare": lambda: bare(False),
            "bare+reduce": lambda: bare(True)}


def timed(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Rank function: this rank's median wall and CPU time per call of each program, s."""
    import torch.distributed as dist

    rows = []
    for nbytes in sizes:
        calls = 20 if nbytes <= 2**18 else 5
        programs = _programs(nbytes)
        wall: dict[str, list[float]] = {k: [] for k in programs}
        cpu: dict[str, list[float]] = {k: [] for k in programs}
        for run in programs.values():
            run()  # warm: buffers, connections
        for _ in range(repeats):
            for name, run in programs.items():
                dist.barrier()
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(calls):
                    run()
                wall[name].append((time.perf_counter() - t0) / calls)
                cpu[name].append((time.process_time() - c0) / calls)
        rows += [{"bytes": nbytes, "program": name, "wall_s": statistics.median(wall[name]),
                  "cpu_s": statistics.median(cpu[name])} for name in programs]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=4)
    add_out(parser)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    per_rank = spawn(timed, args.world, SIZES, REPEATS, backend="gloo", timeout=120)
    records = []
    for i, row in enumerate(per_rank[0]):
        ranks = [rank_rows[i] for rank_rows in per_rank]
        records.append({"world": args.world, "bytes": row["bytes"], "program": row["program"],
                        "wall_s": max(r["wall_s"] for r in ranks),
                        "cpu_per_rank_s": statistics.mean(r["cpu_s"] for r in ranks),
                        "cpu_over_cores": sum(r["cpu_s"] for r in ranks) / (os.cpu_count() or 1)})
    print(f"{'size(B)':>9} {'program':>12} {'wall(ms)':>9} {'cpu/rank(ms)':>13} {'cpu/cores':>10}")
    for rec in records:
        print(f"{rec['bytes']:>9} {rec['program']:>12} {rec['wall_s'] * 1e3:>9.3f} "
              f"{rec['cpu_per_rank_s'] * 1e3:>13.3f} {rec['cpu_over_cores'] * 1e3:>10.3f}")
    print("wrote", write_json({"records": records}, args.out, "ring_bare"))


if __name__ == "__main__":
    main()
