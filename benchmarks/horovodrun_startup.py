"""``horovodrun``'s start-up, measured at the driver, beside the simulator's prediction.

    flock -x /tmp/distml-measure.lock .venv/bin/python benchmarks/horovodrun_startup.py \\
        [--np 2 4] [--runs 3] [--calibration FILE]

For each ``np``: ``runs`` jobs of ``python -c "import backends.horovod as hvd; hvd.init();
hvd.shutdown()"`` under :func:`backends.horovod.runner.horovodrun`; the time, from the driver's
start, at which the last task registered (``hvd.init()`` → ``notify_driver``), and the job's wall
time. Beside it, :func:`simulator.horovod.predict_startup` from primitives only: the time to start
one interpreter and import torch (:func:`lab.horovod_predict.process_start_s`, one process) on
the host's cores, and the calibrated one-way latency (``--calibration``, else the default
calibration file; 0 if there is none: it is negligible beside the start).

The real task registers at the *end* of ``hvd.init()``, after the process-group rendezvous and
the background thread's start; the model registers right after the imports and then joins the
group. Writes ``OUT/horovodrun_startup-<run id>.json`` (a new file every run: ``_output.py``).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from backends.horovod.runner import DriverService, horovodrun
from lab.horovod_predict import process_start_s
from simulator.core.calibration import CalibrationError, find_entry
from simulator.horovod import predict_startup

from _output import add_out, write_json

TASK = "import backends.horovod as hvd; hvd.init(); hvd.shutdown()"


def measure(np: int) -> tuple[float, float]:
    """``(last registration, s after the driver started; job wall time, s)`` of one job."""
    seen: dict[str, DriverService] = {}

    def started(driver: DriverService, pids: list[int]) -> None:
        seen["driver"] = driver

    t0 = time.monotonic()
    rc = horovodrun(np, [sys.executable, "-c", TASK], stdout=io.StringIO(),
                    stderr=io.StringIO(), on_start=started)
    wall = time.monotonic() - t0
    if rc != 0:
        raise RuntimeError(f"the start-up job failed with status {rc}")
    return max(r.at_s for r in seen["driver"].registered.values()), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calibration", type=Path)
    add_out(parser)
    args = parser.parse_args()
    start_s = process_start_s(repeats=3)
    cores = float(os.cpu_count() or 1)
    print(f"one interpreter + import torch: {start_s:.3f} s; {cores:g} cores", flush=True)
    rows: list[dict[str, Any]] = []
    for np in args.np:
        try:
            message_s = find_entry(np, path=args.calibration).latency_s
        except (CalibrationError, OSError):
            message_s = 0.0
        runs = [measure(np) for _ in range(args.runs)]
        registered = statistics.median(r for r, _ in runs)
        wall = statistics.median(w for _, w in runs)
        pred = predict_startup(np, start_s, message_s, cores=cores)
        row = {"np": np, "registered_median_s": registered,
               "registered_runs_s": [r for r, _ in runs], "wall_median_s": wall,
               "predicted_registered_s": pred.registered_s, "predicted_ready_s": pred.ready_s,
               "process_start_s": start_s, "message_s": message_s,
               "rel_error": (pred.registered_s - registered) / registered}
        rows.append(row)
        print(f"np={np}: all registered at {registered:.2f} s (median of {args.runs}), job "
              f"{wall:.2f} s; predicted registered {pred.registered_s:.2f} s, error "
              f"{row['rel_error']:+.0%}", flush=True)
    write_json({"records": rows}, args.out, "horovodrun_startup")


if __name__ == "__main__":
    main()
