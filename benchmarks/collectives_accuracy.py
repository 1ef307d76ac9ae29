"""Accuracy of the chapter-2 collective predictions on this machine.

    .venv/bin/python benchmarks/collectives_accuracy.py [--out benchmarks/results] [--repeats 15]

Calibrates worlds 2 and 4 into a fresh file (primitives only: ping-pong sweep, concurrent
exchanges, reduction, copy, matmul), then, in separate launches, measures the four headline
algorithms of the issue — ring and recursive-doubling all-reduce, ring all-gather, binomial
broadcast — at world 2 and 4 over 64 KiB–16 MiB, with PyTorch's built-in timed side by side.
Writes every point (prediction, measured median/p10/p90, error, busbw, built-in time) to
``collectives_accuracy.json``/``.csv`` and prints the median |relative error| per twin and world.
Asserts nothing: read the medians, and run it twice to see how much this machine swings.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from lab.calibrate import calibrate
from lab.compare import compare, median_abs_error, records_as_dicts, write_csv, write_json
from lab.twins import get_twin

TWINS = ("all_reduce.ring", "all_reduce.recursive_doubling", "all_gather.ring",
         "broadcast.binomial")
SIZES = [2**k for k in range(16, 25, 2)]  # 64 KiB … 16 MiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    records, summary = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.json"
        for world in (2, 4):
            calibrate(world, path=cal)
        for name in TWINS:
            for world in (2, 4):
                got = compare(get_twin(name), [world], SIZES, args.repeats, cal, progress=False)
                records += got
                summary.append({"twin": name, "world": world,
                                "median_abs_rel_error": median_abs_error(got)})
                print(f"{name:<31} p={world}: median |error| {median_abs_error(got):6.1%}   "
                      + " ".join(f"{r.rel_error:+.0%}" for r in got), flush=True)
    rows = records_as_dicts(records)
    write_csv(rows, args.out / "collectives_accuracy.csv")
    write_json({"records": rows, "summary": summary}, args.out / "collectives_accuracy.json")


if __name__ == "__main__":
    main()
