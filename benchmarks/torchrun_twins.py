"""Every registered twin under ``torchrun``: does its measurement run on ranks torchrun started?

For each twin (``distml-lab list``), its quick sweep is run with ``python -m lab.run`` on
``torchrun`` agents meeting through the c10d rendezvous: two agents ("nodes") when the twin's
process count is even, else one; a twin of one process driving all its replicas
(``lab.run.ONE_PROCESS``: ``tf.mirrored``, ``data_parallel``) on one rank. A strategy twin
whose process count at its quick world is odd (a parameter server's ``1 + S + W``) runs at the
nearest world whose count is even. Prints one line per twin — ok, failed, or refused by design
(``lab.run``'s one-line usage error), seconds, records, and how many of its launches ran on
torchrun's ranks (0: each rank measured alone) — and writes
``benchmarks/results/torchrun_twins-<run id>.json``.

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

from lab.run import ONE_PROCESS
from lab.strategies import all_strategies
from lab.twins import all_twins
from tests.lab.torchrun_nodes import run_nodes

from _output import add_out, write_json


def processes_of(name: str) -> int:
    """The process count the twin's quick sweep runs on: at its smallest quick world, or for
    a strategy twin whose count there is odd, the world nearest it whose count is even."""
    twin = next((s for s in all_strategies() if s.name == name), None)
    if twin is None:
        collective = next(t for t in all_twins() if t.name == name)
        return max(2, collective.min_world, min(collective.quick_worlds))
    quick = min(twin.quick_worlds)

    def count(world: int) -> int:
        return max(twin.processes(world, p) for p in twin.points_at(world, twin.quick_points))

    if count(quick) % 2 == 0:
        return count(quick)
    nearest = sorted(range(twin.min_world, twin.max_world + 1), key=lambda w: (abs(w - quick), w))
    return next((count(w) for w in nearest if count(w) % 2 == 0), count(quick))


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
        # a twin of one process (its replicas the devices of that process) runs on one rank
        procs = 1 if name in ONE_PROCESS else processes_of(name)
        nodes = 2 if procs % 2 == 0 else 1
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            agents = run_nodes(nodes, procs // nodes, ["lab.run", name, "--quick", "--repeats",
                                                       str(args.repeats), "--out", tmp],
                               timeout_s=600, run_id=f"bench-{name}")
            seconds = time.perf_counter() - start
            out = Path(tmp) / f"{name}.json"
            ok = all(a.returncode == 0 for a in agents) and out.exists()
            doc = json.loads(out.read_text()) if ok else {}
            # a rank's own one-line refusal (its exit status 2 is not the agent's: torchrun
            # exits 1 for any failed rank), else the last line a failed agent wrote
            refusal = [line for a in agents for line in a.stderr.splitlines()
                       if line.startswith("lab.run: error:")]
            refused = not ok and bool(refusal)
            error = "" if ok else refusal[0] if refused else next(
                (a.stderr.strip().splitlines() or [""])[-1] for a in agents if a.returncode)
        status = "ok" if ok else "refused" if refused else "FAILED"
        rows.append({"twin": name, "processes": procs, "nodes": nodes, "ok": ok,
                     "status": status, "seconds": round(seconds, 1),
                     "records": len(doc.get("records", [])),
                     "launches_on_ranks": doc.get("launches_on_ranks"), "error": error[-300:]})
        print(f"{name:<30} {procs} procs on {nodes} node(s): {status:<7} {seconds:6.1f} s "
              f"{rows[-1]['records']} records, {rows[-1]['launches_on_ranks']} launches on "
              f"ranks {error[-120:]}", flush=True)
    refused = sum(r["status"] == "refused" for r in rows)
    print(f"{sum(r['ok'] for r in rows)}/{len(rows) - refused} twins ran under torchrun, "
          f"{refused} refused by design")
    print(write_json({"rows": rows}, args.out, "torchrun_twins"))


if __name__ == "__main__":
    main()
