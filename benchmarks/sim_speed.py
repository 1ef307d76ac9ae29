"""How fast the simulator runs an all-reduce on thousands of ranks, and in how much memory.

    .venv/bin/python benchmarks/sim_speed.py [--out benchmarks/results] [--limit 150]

Writes ``sim_speed-<run id>.json``: a table of algorithm × engine × world × wall seconds ×
peak memory, each point in a child process of its own (its peak resident memory is its own,
and a point that runs past ``--limit`` seconds is stopped and recorded as such; larger worlds
of that engine are then skipped). The engines are those of ``distml-lab simulate --engine``:

* ``events`` — the per-rank discrete-event simulation (one SimPy process per rank, every
  message its own events, on the bucketed kernel of :mod:`simulator.core.kernel`):
  :func:`simulator.core.comm.run_spmd`;
* ``fast`` — an exact fast path (:mod:`simulator.collectives.fast`), where the algorithm has
  one on this cluster; ``auto`` takes it where it exists, else events.

Each point predicts one all-reduce of 64 MiB of float32 on DGX A100 nodes (``a100`` preset:
NVSwitch inside a node, InfiniBand between, ``fair`` sharing) through
:func:`lab.predict.predict`, the code the command line runs, with tracing off. For the events
engine it also counts the kernel's events at worlds up to 512 (every entry of its queue:
SimPy events and plain callbacks) and fits the growth exponents of the wall time and of the
events per algorithm step (``p`` ranks each send one message a step, so
events per step should grow as ``p``: exponent 1). It asserts nothing about time (timings on
a shared machine are noisy); the load average at the start is recorded beside them.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import platform
import time
from typing import Any

from _output import add_out, write_json

NBYTES = 64 * 2**20
CLUSTER = "a100"
RUNS: dict[str, dict[str, tuple[int, ...]]] = {  # algorithm -> engine -> worlds
    "all_reduce.ring": {"events": (128, 256, 512, 1024, 2048, 4096),
                        "auto": (1024, 4096, 16384, 65536)},
    "all_reduce.recursive_doubling": {"events": (128, 256, 512, 1024),
                                      "auto": (1024, 4096, 16384, 65536)},
}
COUNT_UP_TO = 512  # events are counted (one more run) up to this world
TARGETS = {"events 1024 ranks": "≤ 10 s, ≤ 1 GB", "events 4096 ranks": "≤ 120 s",
           "auto 1024 / 16384 / 65536 ranks": "≤ 1 / 5 / 30 s"}


def _peak_rss_bytes() -> int:
    """This process's peak resident memory (``VmHWM``), bytes."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(twin_name: str, world: int, engine: str, count: bool, out: Any) -> None:
    from lab.predict import predict
    from lab.twins import get_twin
    from simulator.core.kernel import Kernel

    events = [0]
    if count:  # every entry queued is done once: count them as they are queued
        schedule, call_later = Kernel.schedule, Kernel.call_later

        def scheduled(env: Kernel, *args: Any) -> None:
            events[0] += 1
            schedule(env, *args)

        def called(env: Kernel, *args: Any) -> None:
            events[0] += 1
            call_later(env, *args)

        Kernel.schedule = scheduled  # type: ignore[method-assign]
        Kernel.call_later = called  # type: ignore[method-assign]
    start = time.perf_counter()
    row = predict(get_twin(twin_name), world, [NBYTES], CLUSTER, engine=engine)[0]
    wall = time.perf_counter() - start
    out.put({"wall_s": wall, "predicted_s": row["predicted_s"],
             "engine_used": row.get("engine", engine), "peak_rss_bytes": _peak_rss_bytes(),
             "events": events[0] if count else None})


def one(twin_name: str, world: int, engine: str, limit_s: float,
        count: bool = False) -> dict[str, Any]:
    """One point in a child process, stopped after ``limit_s`` seconds."""
    record: dict[str, Any] = {"twin": twin_name, "engine": engine, "world": world,
                              "bytes": NBYTES, "cluster": CLUSTER, "limit_s": limit_s,
                              "counted": count}
    queue: Any = mp.get_context("fork").Queue()
    child = mp.get_context("fork").Process(target=_child,
                                           args=(twin_name, world, engine, count, queue))
    start = time.perf_counter()
    child.start()
    child.join(limit_s)
    if child.is_alive():
        child.kill()
        child.join()
        record.update(finished=False, wall_s=time.perf_counter() - start)
    elif child.exitcode != 0:
        record.update(finished=False, wall_s=time.perf_counter() - start,
                      error=f"exit status {child.exitcode}")
    else:
        record.update(finished=True, **queue.get())
    return record


def exponent(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log y against log x: y grows as x to this power."""
    if len(points) < 2:
        return None
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--limit", type=float, default=150.0,
                        help="seconds one point may take before it is stopped")
    args = parser.parse_args()
    load = os.getloadavg()
    records, fits = [], {}
    for twin_name, engines in RUNS.items():
        for engine, worlds in engines.items():
            for world in worlds:
                record = one(twin_name, world, engine, args.limit)
                records.append(record)
                status = (f"{record['wall_s']:8.2f} s  {record['peak_rss_bytes'] / 2**20:7.0f} "
                          f"MiB  predicted {record['predicted_s'] * 1e3:9.4f} ms "
                          f"({record['engine_used']})" if record["finished"]
                          else f"stopped after {record['wall_s']:.0f} s "
                               f"{record.get('error', '')}")
                print(f"{twin_name:<30} {engine:<6} p={world:<6} {status}", flush=True)
                if not record["finished"]:
                    break  # larger worlds only take longer
            if engine == "events":
                counted = [one(twin_name, w, engine, args.limit, count=True)
                           for w in worlds if w <= COUNT_UP_TO]
                records += counted
                done = [r for r in records if r["twin"] == twin_name and r["finished"]
                        and r["engine"] == "events" and not r["counted"]]
                steps = [(r["world"], r["events"] / _steps(twin_name, r["world"]))
                         for r in counted if r["finished"]]
                fits[twin_name] = {
                    "wall_exponent": exponent([(r["world"], r["wall_s"]) for r in done]),
                    "events_per_step_exponent": exponent(steps),
                    "events_per_message": [
                        (r["world"], r["events"] / _messages(twin_name, r["world"]))
                        for r in counted if r["finished"]]}
                print(f"{twin_name}: fitted exponents {fits[twin_name]}", flush=True)
    document = {"host": platform.node(), "python": platform.python_version(),
                "cpus": os.cpu_count(), "load_average_at_start": load, "targets": TARGETS,
                "fits": fits, "records": records}
    path = write_json(document, args.out, "sim_speed")
    print(f"wrote {path}")


def _steps(twin_name: str, p: int) -> int:
    """The algorithm's steps at ``p`` ranks (``p`` a power of two)."""
    return 2 * (p - 1) if twin_name.endswith("ring") else int(math.log2(p))


def _messages(twin_name: str, p: int) -> int:
    """Messages the algorithm sends at ``p`` ranks: each rank one a step."""
    return p * _steps(twin_name, p)


if __name__ == "__main__":
    main()
