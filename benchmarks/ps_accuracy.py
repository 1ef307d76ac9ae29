"""Accuracy of the parameter-server prediction on this machine (book ch. 3).

    flock -x /tmp/distml-measure.lock .venv/bin/python benchmarks/ps_accuracy.py [--iterations 40]

Calibrates worlds 3, 4 and 5 into a fresh file (primitives only: ping-pong, concurrent
exchanges, reduction, copy, matmul), measures the two PS-specific primitives — a receive from
any source (ping-pong, one launch per world) and the code's software costs on one process —
then, for each configuration of 1 + S + W ≤ 5 ranks, runs the real parameter server and the
simulated twin and prints predicted and measured time per iteration (median over workers and
iterations) and the relative error. Writes ``benchmarks/results/ps_accuracy.json``/``.csv``.
Asserts nothing; the prediction is never fitted to these runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from backends.parameter_server import PSConfig
from lab.calibrate import QUICK_SIZES, calibrate
from lab.compare import write_csv, write_json
from lab.parameter_server import compare, measure_anysource, profile_costs

LAYOUTS = [(1, 1, "mlp"), (1, 2, "mlp"), (1, 3, "mlp"), (2, 2, "mlp"), (2, 1, "mlp"),
           (1, 2, "sparse_lr"), (2, 2, "sparse_lr"), (1, 3, "sparse_lr")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--iterations", type=int, default=40)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.json"
        for world in (3, 4, 5):
            calibrate(world, path=cal, sizes=QUICK_SIZES, repeats=10)
        costs = profile_costs()
        anysource = {world: measure_anysource(world) for world in (3, 4, 5)}
        print("costs:", {k: f"{v * 1e6:.2f} us" if k.endswith("_s") else f"{v * 1e9:.2f} ns"
                         for k, v in asdict(costs).items()},
              "anysource:", {w: f"{v * 1e6:.1f} us" for w, v in anysource.items()}, flush=True)
        for servers, workers, model in LAYOUTS:
            cfg = PSConfig(servers=servers, workers=workers, model=model,
                           iterations=args.iterations, lr=0.1)
            world = 1 + servers + workers
            row = compare(cfg, cal, replace(costs, anysource_s=anysource[world]))
            rows.append(row)
            predicted, measured = row["predicted_s"] * 1e3, row["measured_median_s"] * 1e3
            print(f"S={servers} W={workers} {model:<9} world {world}: predicted "
                  f"{predicted:6.2f} ms, measured {measured:6.2f} ms, error "
                  f"{row['rel_error']:+.0%}", flush=True)
    median = statistics.median(abs(r["rel_error"]) for r in rows)
    print(f"median |relative error| over {len(rows)} configurations: {median:.1%}")
    write_csv(rows, args.out / "ps_accuracy.csv")
    write_json({"records": rows, "median_abs_rel_error": median,
                "costs": asdict(costs), "anysource_s": anysource}, args.out / "ps_accuracy.json")


if __name__ == "__main__":
    main()
