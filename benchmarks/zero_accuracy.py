"""ZeRO stages 0–3: predicted vs measured step time, and predicted vs measured model states.

    .venv/bin/python benchmarks/zero_accuracy.py [--out benchmarks/results] [--repeats 10]
        [--widths 512,2048,2048,512] [--batch 64] [--worlds 2,4]

Calibrates each world into a fresh file (primitives only), profiles the MLP's units on one
process (forward, backward, Adam step: :func:`lab.zero.profile_units`), predicts one training
step per stage with :func:`simulator.zero.simulate_zero_step` on the calibrated twin (ranks
sharing the host's cores), and measures the real :class:`backends.zero.Zero` on ``world``
processes. Writes ``zero_accuracy-<run id>.json`` / ``.csv`` (new files every run:
``_output.py``); prints the median |relative error| per world and the model-state bytes (measured
by counting the tensors each rank holds). Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import asdict
from pathlib import Path

from lab.calibrate import calibrate
from lab.zero import compare_stages, parameter_count

from _output import add_out, write_csv, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--widths", default="512,2048,2048,512")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--worlds", default="2,4")
    args = parser.parse_args()
    widths = tuple(int(w) for w in args.widths.split(","))
    worlds = [int(w) for w in args.worlds.split(",")]
    print(f"MLP {widths}: {parameter_count(widths):,} parameters "
          f"({4 * parameter_count(widths) / 2**20:.1f} MiB fp32), local batch {args.batch}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.json"
        for world in worlds:
            calibrate(world, path=cal)
            points = compare_stages(world, widths, args.batch, args.repeats, calibration=cal)
            for pt in points:
                row = {**asdict(pt), "rel_error": pt.rel_error}
                rows.append(row)
                mem = " ".join(
                    f"{part[:5]} {pt.measured_states[part] / 2**20:.2f}/"
                    f"{pt.predicted_states[part] / 2**20:.2f}MiB"
                    for part in ("parameters", "gradients", "optimizer"))
                print(f"p={world} stage {pt.stage}: predicted {pt.predicted_s * 1e3:7.1f} ms, "
                      f"measured {pt.measured_median_s * 1e3:7.1f} ms "
                      f"[{pt.measured_p10_s * 1e3:.1f}, {pt.measured_p90_s * 1e3:.1f}] "
                      f"error {pt.rel_error:+.0%}   measured/predicted {mem}", flush=True)
            errors = [abs(p.rel_error) for p in points]
            print(f"p={world}: median |error| {statistics.median(errors):.1%}")
    write_json({"records": rows}, args.out, "zero_accuracy")
    write_csv([{k: v for k, v in r.items() if not isinstance(v, dict)} for r in rows],
              args.out, "zero_accuracy")


if __name__ == "__main__":
    main()
