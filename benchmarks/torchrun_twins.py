"""Every registered twin under ``torchrun``: does its measurement run on ranks torchrun started?

For each twin (``distml-lab list``), its quick sweep is run with ``python -m lab.run`` on
``torchrun`` agents meeting through the c10d rendezvous: two agents ("nodes") when the twin's
process count is even, else one. Prints one line per twin (ok / failed, seconds, records) and
writes ``benchmarks/results/torchrun_twins-<run id>.json``.

    .venv/bin/python benchmarks/torchrun_twins.py [--only ddp,all_reduce.ring] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.strategies import all_strategies
from lab.twins import all_twins
from tests.lab.torchrun_nodes import run_nodes

from _output import add_out, write_json


def processes_of(name: str) -> int:
    """The process count of the twin's quick sweep at its smallest quick world."""
    for s in all_strategies():
        if s.name == name:
            world = min(s.quick_worlds)
            return max(s.processes(world, p) for p in s.points_at(world, s.quick_points))
    twin = next(t for t in all_twins() if t.name == name)
    return max(2, twin.min_world, min(twin.quick_worlds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated twin names (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    add_out(parser)
    args = parser.parse_args()
    names = [t.name for t in all_twins()] + [s.name for s in all_strategies()]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    rows = []
    for name in names:
        procs = processes_of(name)
        nodes = 2 if procs % 2 == 0 else 1
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            agents = run_nodes(nodes, procs // nodes, ["lab.run", name, "--quick", "--repeats",
                                                       str(args.repeats), "--out", tmp],
                               timeout_s=600, run_id=f"bench-{name}")
            seconds = time.perf_counter() - start
            out = Path(tmp) / f"{name}.json"
            ok = all(a.returncode == 0 for a in agents) and out.exists()
            records = len(json.loads(out.read_text())["records"]) if ok else 0
            error = "" if ok else next((a.stderr.strip().splitlines() or [""])[-1]
                                       for a in agents if a.returncode != 0)
        rows.append({"twin": name, "processes": procs, "nodes": nodes, "ok": ok,
                     "seconds": round(seconds, 1), "records": records, "error": error[-300:]})
        print(f"{name:<30} {procs} procs on {nodes} node(s): {'ok' if ok else 'FAILED'} "
              f"{seconds:6.1f} s {records} records {error[-120:]}", flush=True)
    print(f"{sum(r['ok'] for r in rows)}/{len(rows)} twins ran under torchrun")
    print(write_json({"rows": rows}, args.out, "torchrun_twins"))


if __name__ == "__main__":
    main()
