"""Accuracy of the parameter-server prediction on this machine (book ch. 3).

    flock -x /tmp/distml-measure.lock env OMP_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/ps_accuracy.py [--rounds 5] [--repeats 1] [--van] [--tag _x]

The same configuration's time per iteration moves by half from one launch to the next on a
shared 2-core machine (S=1, W=3 MLP: 4.5–8.1 ms over six launches), and so do the calibrated
primitives, so the benchmark measures in **rounds** and reports medians: each round
calibrates worlds 3, 4 and 5 into a file of its own (primitives only: ping-pong, concurrent
exchanges, chain of dependent exchanges, reduction, copy, matmul) and then runs every
configuration of ``1 + S + W ≤ 5`` ranks ``--repeats`` times, one launch per world size with
its configurations interleaved (:func:`backends.parameter_server.train.run_scenarios`), so
that drift hits all of them alike. Once per benchmark it also measures the code's software
costs on one process and the receive-from-any-source extra (ping-pong), and with ``--van`` the
van's messages (:func:`lab.parameter_server.measure_van_link`: the lab's own request–response
echo from ``k`` senders to one node, timed as CPU per message).

For each configuration it prints the measured time per iteration — the median over every run
of each run's median over workers and iterations — beside the simulated twin's, the median
over rounds of the prediction from that round's calibration:

* ``calibration`` (the lab's default, :func:`lab.parameter_server.predict`): the calibration's
  α, B and busy latency (a message that starts while others are in flight waits for its process
  to be scheduled) plus the any-source extra;
* ``van`` (with ``--van``): messages cost the van echo's measured CPU at the receiver's
  fan-in, as work of the shared cores, instead of the calibration's network terms.

The prediction is proportional to the calibrated α more than to anything else (a message's
header, readiness signal and payload are each a hop), and α at world 5 moves between about
130 and 440 µs from one calibration to the next: hence the median over rounds.

Writes ``OUT/ps_accuracy{tag}-<run id>.json``/``.csv`` (new files every run: ``_output.py``) with
every run and every round's calibration. Asserts nothing; no prediction is fitted to these runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from backends.launch import spawn
from backends.parameter_server import PSConfig
from backends.parameter_server.train import collect, run_scenarios
from lab.calibrate import QUICK_SIZES, calibrate
from lab.parameter_server import (
    measure_anysource,
    measure_van_link,
    predict,
    profile_compute,
    profile_costs,
)
from simulator.core.calibration import CalibrationEntry, find_entry
from simulator.parameter_server import PSCosts, VanLink

from _output import add_out, write_csv, write_json

LAYOUTS = [(1, 1, "mlp"), (1, 2, "mlp"), (1, 3, "mlp"), (2, 2, "mlp"), (2, 1, "mlp"),
           (1, 2, "sparse_lr"), (2, 2, "sparse_lr"), (1, 3, "sparse_lr")]
WORLDS = (3, 4, 5)


def configs(iterations: int) -> list[PSConfig]:
    """The benchmark's configurations, BSP, in :data:`LAYOUTS` order."""
    return [PSConfig(servers=s, workers=w, model=m, iterations=iterations, lr=0.1)
            for s, w, m in LAYOUTS]


def measure_round(cfgs: list[PSConfig], repeats: int) -> dict[int, list[float]]:
    """Every configuration ``repeats`` times, interleaved, one launch per world size: each
    run's time per iteration (s), by index in ``cfgs``."""
    times: dict[int, list[float]] = {i: [] for i in range(len(cfgs))}
    for world in WORLDS:
        mine = [i for i, c in enumerate(cfgs) if 1 + c.servers + c.workers == world]
        order = [i for _ in range(repeats) for i in mine]
        outs = spawn(run_scenarios, world, [cfgs[i] for i in order], backend="gloo",
                     timeout=60, deadline=60 + 10 * len(order))
        for j, i in enumerate(order):
            times[i].append(collect(cfgs[i], [o[j] for o in outs]).time_per_iteration_s)
    return times


def predictions(cfg: PSConfig, entries: list[CalibrationEntry], costs: PSCosts,
                anysource_s: float, van: VanLink | None) -> dict[str, Any]:
    """Each round's calibration prediction of ``cfg`` and, given ``van``, the van one, s."""
    compute = profile_compute(cfg)
    cal = [predict(cfg, e, replace(costs, anysource_s=anysource_s), compute) for e in entries]
    # the echo's CPU already holds coding a message, receiving it from any source and waking
    # the app: the van prediction charges none of them twice
    bare = replace(costs, message_s=0.0, wakeup_s=0.0, anysource_s=0.0)
    van_s = (predict(cfg, entries[0], bare, compute, van).time_per_iteration_s()
             if van is not None else None)
    return {"calibration_s": [p.time_per_iteration_s() for p in cal],
            "idle_s": [p.idle_time_s() for p in cal],
            "throughput": [p.throughput(cfg.batch_size) for p in cal],
            "van_s": van_s, "compute_s": float(compute.mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5,
                        help="calibrate-then-measure rounds (default 5)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of each configuration per round (default 1)")
    parser.add_argument("--van", action="store_true",
                        help="also measure the van echo and print its prediction")
    parser.add_argument("--calibration-repeats", type=int, default=10)
    parser.add_argument("--tag", default="", help="suffix of the result files")
    args = parser.parse_args()
    begin = time.perf_counter()
    cfgs = configs(args.iterations)
    runs: dict[int, list[float]] = {i: [] for i in range(len(cfgs))}
    entries: dict[int, list[CalibrationEntry]] = {w: [] for w in WORLDS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            cal = Path(tmp) / f"calibration{r}.json"
            for world in WORLDS:
                calibrate(world, path=cal, sizes=QUICK_SIZES, repeats=args.calibration_repeats)
                entries[world].append(find_entry(world, "gloo", path=cal))
            for i, t in measure_round(cfgs, args.repeats).items():
                runs[i].extend(t)
            print(f"round {r + 1}: " + ", ".join(
                f"world {w} busy latency {entries[w][-1].bus_latency_s * 1e6:.0f} us"
                for w in WORLDS) + f" ({time.perf_counter() - begin:.0f} s)", flush=True)
    costs = profile_costs()
    anysource = {world: measure_anysource(world) for world in WORLDS}
    vans = {world: measure_van_link(world) for world in WORLDS} if args.van else {}
    print("costs:", {k: f"{v * 1e6:.2f} us" if k.endswith("_s") else f"{v * 1e9:.2f} ns"
                     for k, v in asdict(costs).items()}, flush=True)
    for world, v in vans.items():
        for k, (h, a, b) in enumerate(zip(v.header_s, v.payload_s, v.payload_Bps,
                                           strict=True), start=1):
            print(f"world {world}, fan-in {k}: van header {h * 1e6:.1f} us, payload "
                  f"{a * 1e6:.1f} us + n / {b / 1e9:.2f} GB/s (CPU)", flush=True)
    for world in WORLDS:
        print(f"world {world}: any-source extra {anysource[world] * 1e6:.1f} us", flush=True)
    rows = []
    for i, cfg in enumerate(cfgs):
        world = 1 + cfg.servers + cfg.workers
        p = predictions(cfg, entries[world], costs, anysource[world], vans.get(world))
        measured = statistics.median(runs[i])
        predicted = statistics.median(p["calibration_s"])
        row = {"servers": cfg.servers, "workers": cfg.workers, "world": world,
               "model": cfg.model, "consistency": cfg.consistency,
               "measured_median_s": measured, "measured_runs_s": runs[i],
               "predicted_s": predicted, "predicted_rounds_s": p["calibration_s"],
               "rel_error": (predicted - measured) / measured,
               "predicted_idle_s": statistics.median(p["idle_s"]),
               "predicted_throughput": statistics.median(p["throughput"]),
               "compute_profile_s": p["compute_s"]}
        van = ""
        if p["van_s"] is not None:
            row["van_predicted_s"] = p["van_s"]
            row["van_rel_error"] = (p["van_s"] - measured) / measured
            van = f", van {p['van_s'] * 1e3:6.2f} ms ({row['van_rel_error']:+.0%})"
        rows.append(row)
        print(f"S={cfg.servers} W={cfg.workers} {cfg.model:<9} world {world}: measured "
              f"{measured * 1e3:6.2f} ms (runs {min(runs[i]) * 1e3:.2f}–"
              f"{max(runs[i]) * 1e3:.2f}); calibration {predicted * 1e3:6.2f} ms "
              f"({row['rel_error']:+.0%}; rounds {min(p['calibration_s']) * 1e3:.2f}–"
              f"{max(p['calibration_s']) * 1e3:.2f}){van}", flush=True)
    medians = {name: statistics.median(abs(r[key]) for r in rows) for name, key in (
        ("calibration", "rel_error"), ("van", "van_rel_error")) if key in rows[0]}
    print(f"median |relative error| over {len(rows)} configurations: "
          + ", ".join(f"{k} {v:.1%}" for k, v in medians.items())
          + f" ({time.perf_counter() - begin:.0f} s)")
    write_csv([{k: v for k, v in r.items() if not isinstance(v, list)} for r in rows],
              args.out, f"ps_accuracy{args.tag}")
    write_json({"records": rows, "median_abs_rel_error": medians["calibration"],
                "median_abs_rel_error_by_model": medians, "costs": asdict(costs),
                "calibrations": {w: [asdict(e) for e in es] for w, es in entries.items()},
                "van": {w: asdict(v) for w, v in vans.items()}, "anysource_s": anysource,
                "rounds": args.rounds, "repeats": args.repeats},
               args.out, f"ps_accuracy{args.tag}")


if __name__ == "__main__":
    main()
