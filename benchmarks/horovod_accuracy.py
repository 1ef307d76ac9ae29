"""Horovod step time, predicted vs measured, over fusion-threshold and cycle-time sweeps.

Two runs, each under five minutes with the machine to itself::

    OMP_NUM_THREADS=1 flock -x /tmp/distml-measure.lock .venv/bin/python \\
        benchmarks/horovod_accuracy.py --calibrate
    OMP_NUM_THREADS=1 flock -x /tmp/distml-measure.lock .venv/bin/python \\
        benchmarks/horovod_accuracy.py [--worlds 2 4] [--repeats 8] [--tag _run1]

1. ``--calibrate`` calibrates worlds 2 and 4 into a new file
   ``OUT/horovod_calibration-<run id>.json`` (primitives only: ping-pong, exchanges,
   reduction, copy, matmul; the full sweep of sizes and repeats: the exchanges' fitted latency
   moves the prediction, and a quick sweep's fit is at the mercy of one noisy point) and stops;
   without it the benchmark reads the newest such file (``_output.latest``). With
   ``--calibration FILE`` both use that file instead (``--calibrate`` adds its entries);
2. per world, the primitives of :func:`lab.horovod_primitives.measure_primitives`: the MLP's
   per-layer profile on one process scaled to its whole forward and backward timed with
   ``min(world, cores)`` copies computing at once, the SGD step, an 8-byte ping-pong idle and
   beside computing main threads, how much compute and 1 MiB exchanges slow each other, the
   mean step of a ring of 4 KiB messages, and the CPU of one cycle of the idle engine;
3. per world, one launch times a training step of ``backends.horovod`` at every (fusion
   threshold, cycle time) of :func:`lab.horovod_sweep.sweep_points`, and
   :mod:`simulator.horovod` predicts each from 1 and 2 alone; a second launch times Horovod at
   its defaults beside our DDP at its defaults (:func:`lab.horovod_sweep.versus_ddp`).

Writes ``horovod_accuracy{tag}-<run id>.json``/``.csv`` (new files every run: ``_output.py``)
and prints the median |relative error| per world, per sweep and overall, and the worst point.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from pathlib import Path
from typing import Any

from lab.calibrate import calibrate
from lab.horovod_predict import DEFAULT_BATCH, DEFAULT_WIDTHS
from lab.horovod_primitives import measure_primitives
from lab.horovod_sweep import sweep, sweep_points, versus_ddp
from simulator.core.calibration import CalibrationEntry, find_entry

from _output import add_out, latest, save_copy, write_csv, write_json


def _median_abs(rows: list[dict[str, Any]]) -> float:
    return statistics.median(abs(r["rel_error"]) for r in rows) if rows else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--calibrate", action="store_true",
                        help="calibrate the worlds into a new calibration file (or into "
                             "--calibration), then stop")
    parser.add_argument("--calibration", type=Path, default=None,
                        help="calibration file (default: --calibrate writes a new "
                             "OUT/horovod_calibration-<run id>.json, a measuring run reads "
                             "the newest one)")
    parser.add_argument("--tag", default="", help="suffix of the result names")
    args = parser.parse_args()
    calibration = args.calibration
    if calibration is None and not args.calibrate:
        try:
            calibration = latest("horovod_calibration", args.out)
        except FileNotFoundError as err:
            parser.error(f"{err}: run with --calibrate first")
    widths = list(DEFAULT_WIDTHS)
    rows: list[dict[str, Any]] = []
    versus: list[dict[str, Any]] = []
    primitives: dict[int, Any] = {}
    entries: dict[int, CalibrationEntry] = {}
    with tempfile.TemporaryDirectory() as tmp:  # --calibrate alone measures into tmp, then keeps it
        cal = calibration or Path(tmp) / "calibration.json"
        for w in args.worlds:
            entries[w] = calibrate(w, path=cal) if args.calibrate else find_entry(w, path=cal)
            e = entries[w]
            print(f"calibration p={w} ({e.created}): α {e.latency_s * 1e6:.0f} µs, B "
                  f"{e.bandwidth_Bps / 1e9:.2f} GB/s, bus {e.bus_bandwidth_Bps / 1e9:.2f} "
                  f"GB/s (busy α {e.bus_latency_s * 1e6:.0f} µs), reduce "
                  f"{e.reduce_Bps / 1e9:.1f} GB/s, copy {e.memcpy_Bps / 1e9:.1f} GB/s, "
                  f"{e.cores} cores", flush=True)
        if args.calibrate:
            print("wrote", cal if calibration else save_copy(cal, args.out, "horovod_calibration"))
            return
    for world in args.worlds:
        entry = entries[world]
        prim = measure_primitives(widths, args.batch, world, entry.cores)
        primitives[world] = prim
        inter = prim.interference
        print(f"p={world}: forward {sum(x.forward_s for x in prim.workload.layers) * 1e3:.1f} "
              f"ms, backward {sum(x.backward_s for x in prim.workload.layers) * 1e3:.1f} ms, "
              f"SGD {prim.optimizer_s * 1e3:.2f} ms with {prim.copies} copies at once; 8-byte "
              f"message {prim.small_latency_s * 1e3:.3f} ms idle, "
              f"{prim.busy_latency_s * 1e3:.3f} ms beside compute; a 4 KiB ring step "
              f"{prim.ring_step_s * 1e3:.3f} ms (mean); an idle engine cycle "
              f"{prim.cycle_cpu_s * 1e3:.3f} ms of CPU; while both run compute "
              f"goes at {inter.compute if inter else 1:.2f} and communication at "
              f"{inter.comm if inter else 1:.2f}", flush=True)
        for p in sweep(entry, prim, widths, world, sweep_points(), args.repeats):
            row = {**dataclasses.asdict(p), "rel_error": p.rel_error}
            rows.append(row)
            print(f"p={world} {p.sweep:9s} threshold {p.fusion_threshold_mb:6.1f} MiB cycle "
                  f"{p.cycle_time_ms:5.1f} ms: predicted {p.predicted_s * 1e3:7.1f} ms "
                  f"({p.predicted_cycles} cycles, {p.predicted_all_reduces} all-reduces, "
                  f"exposed {p.exposed_comm_s * 1e3:5.1f})  measured "
                  f"{p.measured_median_s * 1e3:7.1f} [{p.measured_p10_s * 1e3:.1f}–"
                  f"{p.measured_p90_s * 1e3:.1f}] ({p.measured_all_reduces:.1f} all-reduces)"
                  f"  error {p.rel_error:+.1%}", flush=True)
        for v in versus_ddp(entry, prim, widths, world, repeats=args.repeats):
            versus.append({**dataclasses.asdict(v), "rel_error": v.rel_error})
            print(f"p={world} {v.engine:8s} {v.setting:32s} predicted "
                  f"{v.predicted_s * 1e3:7.1f} ms (exposed {v.exposed_comm_s * 1e3:5.1f}) "
                  f"measured {v.measured_median_s * 1e3:7.1f} [{v.measured_p10_s * 1e3:.1f}–"
                  f"{v.measured_p90_s * 1e3:.1f}]  error {v.rel_error:+.1%}", flush=True)
    summary = []
    for world in args.worlds:
        mine = [r for r in rows if r["world"] == world]
        line = {"world": world, "median_abs_error": _median_abs(mine),
                "threshold_sweep": _median_abs([r for r in mine if r["sweep"] == "threshold"]),
                "cycle_sweep": _median_abs([r for r in mine if r["sweep"] == "cycle"]),
                "worst": max(mine, key=lambda r: abs(r["rel_error"]))["rel_error"]}
        summary.append(line)
        print(f"p={world}: median |error| {line['median_abs_error']:.1%} (threshold sweep "
              f"{line['threshold_sweep']:.1%}, cycle sweep {line['cycle_sweep']:.1%}), worst "
              f"{line['worst']:+.1%}", flush=True)
    overall = _median_abs(rows)
    print(f"all points: median |error| {overall:.1%}", flush=True)
    tag = args.tag
    write_csv(rows, args.out, f"horovod_accuracy{tag}")
    write_json({"widths": widths, "batch": args.batch, "records": rows, "versus_ddp": versus,
                "summary": summary, "median_abs_error": overall,
                "calibration": {w: dataclasses.asdict(e) for w, e in entries.items()},
                "primitives": {w: {"optimizer_s": p.optimizer_s, "copies": p.copies,
                                   "small_latency_s": p.small_latency_s,
                                   "busy_latency_s": p.busy_latency_s,
                                   "ring_step_s": p.ring_step_s,
                                   "cycle_cpu_s": p.cycle_cpu_s,
                                   "interference": dataclasses.asdict(p.interference)
                                   if p.interference else None,
                                   "profile": [dataclasses.asdict(x)
                                               for x in p.workload.layers]}
                               for w, p in primitives.items()}},
               args.out, f"horovod_accuracy{tag}")


if __name__ == "__main__":
    main()
