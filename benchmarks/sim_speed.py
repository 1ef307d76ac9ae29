"""How fast the simulator runs a ring all-reduce on thousands of ranks (book §2.5).

    .venv/bin/python benchmarks/sim_speed.py [--out benchmarks/results] [--per-rank-limit 60]

The issue asks for a 1024-rank ring all-reduce in at most 5 s and a 4096-rank one in at most
30 s. This times :func:`~simulator.collectives.all_reduce.ring_all_reduce_fast` (one simulated
step per chunk size, then per-rank clocks in numpy) at 1024 and 4096 ranks on two presets — DGX
A100 nodes (NVLink + InfiniBand, ``fair`` sharing) and CPU servers on one 10 Gb/s switch — and
the per-rank SimPy simulation (one process per rank, every message an event) at growing world
sizes up to 1024, each in a child process stopped after ``--per-rank-limit`` seconds. Where both
finished it records how far apart their makespans are. Writes ``sim_speed-<run id>.json`` (a new
file every run: ``_output.py``); asserts nothing about time (timings on a shared machine are
noisy).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import time
from typing import Any

from simulator.collectives.all_reduce import ring_all_reduce, ring_all_reduce_fast
from simulator.core import preset, run_spmd

from _output import add_out, write_json

NBYTES = 2**28  # 256 MiB of float32 gradients
PRESETS = ("a100", "ethernet-10g")


def fast(cluster_name: str, world: int) -> dict[str, Any]:
    """Build the cluster and run the fast path once; wall time covers both."""
    start = time.perf_counter()
    makespan = ring_all_reduce_fast(preset(cluster_name, world), NBYTES)
    return {"method": "fast", "cluster": cluster_name, "world": world, "bytes": NBYTES,
            "wall_s": time.perf_counter() - start, "makespan_s": makespan}


def _per_rank_child(cluster_name: str, world: int, out: Any) -> None:
    start = time.perf_counter()
    result = run_spmd(preset(cluster_name, world), ring_all_reduce, NBYTES, trace=False)
    out.put((time.perf_counter() - start, result.makespan_s))


def per_rank(cluster_name: str, world: int, limit_s: float) -> dict[str, Any]:
    """The per-rank simulation in a child process, stopped after ``limit_s`` seconds."""
    record: dict[str, Any] = {"method": "per_rank", "cluster": cluster_name, "world": world,
                              "bytes": NBYTES, "limit_s": limit_s}
    queue: Any = mp.Queue()
    child = mp.Process(target=_per_rank_child, args=(cluster_name, world, queue))
    start = time.perf_counter()
    child.start()
    child.join(limit_s)
    if child.is_alive():
        child.terminate()
        child.join()
        record.update(finished=False, wall_s=time.perf_counter() - start, makespan_s=None)
    else:
        wall, makespan = queue.get()
        record.update(finished=True, wall_s=wall, makespan_s=makespan)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--per-rank-limit", type=float, default=60.0,
                        help="seconds a per-rank simulation may take before it is stopped")
    args = parser.parse_args()
    records = []
    for name in PRESETS:
        for world in (1024, 4096):
            records.append(fast(name, world))
            r = records[-1]
            print(f"fast      {name:<13} p={world:<5} {r['wall_s']:7.2f} s wall   "
                  f"makespan {r['makespan_s'] * 1e3:9.3f} ms", flush=True)
    name = "a100"
    for world in (128, 256, 512, 1024):
        record = per_rank(name, world, args.per_rank_limit)
        twin = fast(name, world)
        if record["finished"]:
            record["rel_diff_vs_fast"] = abs(record["makespan_s"] / twin["makespan_s"] - 1)
        records.append(record)
        status = (f"makespan {record['makespan_s'] * 1e3:9.3f} ms (fast path: "
                  f"{record['rel_diff_vs_fast']:.1e} apart)" if record["finished"]
                  else f"stopped after {args.per_rank_limit:.0f} s")
        print(f"per-rank  {name:<13} p={world:<5} {record['wall_s']:7.2f} s wall   {status}",
              flush=True)
        if not record["finished"]:
            break  # bigger worlds only take longer
    document = {"host": platform.node(), "python": platform.python_version(),
                "requirement": {"1024_ranks_s": 5.0, "4096_ranks_s": 30.0},
                "records": records}
    path = write_json(document, args.out, "sim_speed")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
