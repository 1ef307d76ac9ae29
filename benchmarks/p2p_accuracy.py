"""Accuracy of the point-to-point predictions on this machine (book ch. 1–2).

    .venv/bin/python benchmarks/p2p_accuracy.py [--out benchmarks/results] [--repeats 30]

Calibrates (primitives only: ping-pong sweep 1 KiB–64 MiB, fitted) into a fresh file, then, in
separate launches, measures ping-pong at world 2 over 64 KiB–64 MiB and the naive one-to-all at
world 2, 3, 4, and writes each point's prediction, measured median/p10/p90 and relative error to
``p2p_accuracy-<run id>.json`` and ``.csv`` (new files every run: ``_output.py``), plus the
median |relative error| per twin and world. It asserts nothing: timing on a shared machine is
noisy; read the medians.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from lab.calibrate import calibrate
from lab.compare import compare
from lab.records import median_abs_error, records_as_dicts
from lab.twins import get_twin

from _output import add_out, write_csv, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.json"
        for world in (2, 3, 4):
            entry = calibrate(world, path=cal)
            print(f"calibrated {entry.key}: α={entry.latency_s * 1e6:.1f} µs "
                  f"B={entry.bandwidth_Bps / 1e9:.2f} GB/s", file=sys.stderr)
        plan = [("ping_pong", [2], [2**k for k in range(16, 27)]),
                ("one_to_all", [2, 3, 4], [2**k for k in range(16, 27, 2)])]
        records, summary = [], []
        for name, worlds, sizes in plan:
            twin = get_twin(name)
            for world in worlds:
                got = compare(twin, [world], sizes, args.repeats, cal, progress=False)
                records += got
                summary.append({"twin": name, "world": world,
                                "median_abs_rel_error": median_abs_error(got)})
                print(f"{name:<11} p={world}: median |error| {median_abs_error(got):.1%}")
    rows = records_as_dicts(records)
    write_csv(rows, args.out, "p2p_accuracy")
    write_json({"records": rows, "summary": summary}, args.out, "p2p_accuracy")


if __name__ == "__main__":
    main()
