"""Accuracy of the parameter-server prediction on this machine (book ch. 3).

    flock -x /tmp/distml-measure.lock .venv/bin/python benchmarks/ps_accuracy.py [--iterations 40]

Calibrates worlds 3, 4 and 5 into a fresh file (primitives only: ping-pong, concurrent
exchanges, reduction, copy, matmul) and measures the PS-specific primitives: the van's
point-to-point costs at each world size (:func:`lab.parameter_server.measure_van_link`: a
header received from any source, then payloads of 4–64 KiB, echoed by one rank to ``k`` senders
at each fan-in ``k`` with the world's other ranks present: CPU per message), the
receive-from-any-source extra (ping-pong), and the code's software costs on one
process. Then, for each configuration of 1 + S + W ≤ 5 ranks, it runs the real parameter
server once and prints the measured time per iteration (median over workers and
iterations) beside three predictions of the simulated twin:

* ``calibration`` (the lab's default, :func:`lab.parameter_server.compare`): the calibration's
  α, B and busy latency (a message that starts while others are in flight waits for its process
  to be scheduled) plus the any-source extra;
* ``van``: messages cost the van echo's measured CPU at the receiver's fan-in, as work of the
  shared cores, instead of the calibration's network terms;
* ``van-delay``: the same costs as plain delays (what the cores' sharing adds).

Writes ``benchmarks/results/ps_accuracy.json``/``.csv``. Asserts nothing; no prediction is
fitted to these runs.
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
from lab.parameter_server import (
    compare,
    measure_anysource,
    measure_van_link,
    predict,
    profile_compute,
    profile_costs,
)
from simulator.core.calibration import find_entry

LAYOUTS = [(1, 1, "mlp"), (1, 2, "mlp"), (1, 3, "mlp"), (2, 2, "mlp"), (2, 1, "mlp"),
           (1, 2, "sparse_lr"), (2, 2, "sparse_lr"), (1, 3, "sparse_lr")]
WORLDS = (3, 4, 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--calibration-repeats", type=int, default=10)
    parser.add_argument("--tag", default="", help="suffix of the result files")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.json"
        for world in WORLDS:
            calibrate(world, path=cal, sizes=QUICK_SIZES, repeats=args.calibration_repeats)
        costs = profile_costs()
        vans = {world: measure_van_link(world) for world in WORLDS}
        anysource = {world: measure_anysource(world) for world in WORLDS}
        print("costs:", {k: f"{v * 1e6:.2f} us" if k.endswith("_s") else f"{v * 1e9:.2f} ns"
                         for k, v in asdict(costs).items()}, flush=True)
        for world in WORLDS:
            v = vans[world]
            for k, (h, a, b) in enumerate(zip(v.header_s, v.payload_s, v.payload_Bps,
                                               strict=True), start=1):
                print(f"world {world}, fan-in {k}: van header {h * 1e6:.1f} us, payload "
                      f"{a * 1e6:.1f} us + n / {b / 1e9:.2f} GB/s (CPU)", flush=True)
            print(f"world {world}: any-source extra {anysource[world] * 1e6:.1f} us",
                  flush=True)
        for servers, workers, model in LAYOUTS:
            cfg = PSConfig(servers=servers, workers=workers, model=model,
                           iterations=args.iterations, lr=0.1)
            world = 1 + servers + workers
            van = vans[world]
            row = compare(cfg, cal, replace(costs, anysource_s=anysource[world]))
            entry = find_entry(world, "gloo", path=cal)
            compute = profile_compute(cfg)
            measured = row["measured_median_s"]
            for name, pred in (
                    ("van", predict(cfg, entry, costs, compute, van)),
                    ("van_delay", predict(cfg, entry, costs, compute,
                                          replace(van, on_cores=False)))):
                row[f"{name}_predicted_s"] = pred.time_per_iteration_s()
                row[f"{name}_rel_error"] = (pred.time_per_iteration_s() - measured) / measured
            rows.append(row)
            print(f"S={servers} W={workers} {model:<9} world {world}: measured "
                  f"{measured * 1e3:6.2f} ms; calibration {row['predicted_s'] * 1e3:6.2f} ms "
                  f"({row['rel_error']:+.0%}), van {row['van_rel_error']:+.0%}, van-delay "
                  f"{row['van_delay_rel_error']:+.0%}; idle predicted "
                  f"{row['predicted_idle_s'] * 1e3:.2f} ms, measured "
                  f"{row['measured_idle_s'] * 1e3:.2f} ms", flush=True)
    medians = {name: statistics.median(abs(r[key]) for r in rows) for name, key in (
        ("calibration", "rel_error"), ("van", "van_rel_error"),
        ("van_delay", "van_delay_rel_error"))}
    print(f"median |relative error| over {len(rows)} configurations: "
          + ", ".join(f"{k} {v:.1%}" for k, v in medians.items()))
    write_csv(rows, args.out / f"ps_accuracy{args.tag}.csv")
    write_json({"records": rows, "median_abs_rel_error": medians["calibration"],
                "median_abs_rel_error_by_model": medians, "costs": asdict(costs),
                "van": {w: asdict(v) for w, v in vans.items()}, "anysource_s": anysource},
               args.out / f"ps_accuracy{args.tag}.json")


if __name__ == "__main__":
    main()
