"""RPC model parallelism: predicted vs measured training step of a split model.

    .venv/bin/python benchmarks/rpc_accuracy.py [--out benchmarks/results] [--repeats 15]

Calibrates the RPC transport at each world size (echo sweep → α, bandwidth;
:func:`lab.rpc.calibrate_rpc`),
profiles each stage on one process, predicts one step of :func:`backends.rpc.train_split`
(forward RPCs, distributed autograd's gradient chain and acknowledgements, the distributed
optimizer) with :func:`simulator.rpc.simulate_split_step`, and measures it on 2–4 processes
for several model widths. Writes ``rpc_accuracy-<run id>.json`` (a new file every run:
``_output.py``); prints each point and the median |relative error|. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics

from lab.rpc import calibrate_rpc, measure_split_step, predict_split_step, profile_stages

from _output import add_out, write_json

MODELS = {"small": (64, 64, 64, 64), "wide": (256, 1024, 1024, 256),
          "large": (1024, 2048, 2048, 1024)}
BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    rows = []
    fits = {}
    for stages in (1, 2, 3):
        fit = fits[stages] = calibrate_rpc(world=stages + 1)
        print(f"RPC transport, {stages + 1} processes: α = {fit.alpha_s * 1e6:.0f} µs, "
              f"B = {fit.bandwidth_Bps / 1e9:.2f} GB/s (fit residuals "
              f"≤ {max(abs(r) for r in fit.rel_residuals):.0%})", flush=True)
    for name, widths in MODELS.items():
        for stages in (1, 2, 3):
            fit = fits[stages]
            costs = profile_stages(widths, stages, BATCH)
            predicted = predict_split_step(costs, fit)
            measured = measure_split_step(widths, stages, BATCH, args.repeats)
            err = (predicted - measured["median_s"]) / measured["median_s"]
            rows.append({"model": name, "widths": widths, "stages": stages,
                         "world": stages + 1, "alpha_s": fit.alpha_s,
                         "bandwidth_Bps": fit.bandwidth_Bps, "predicted_s": predicted,
                         "measured_median_s": measured["median_s"],
                         "measured_p10_s": measured["p10_s"],
                         "measured_p90_s": measured["p90_s"], "rel_error": err})
            print(f"{name:<6} k={stages}: predicted {predicted * 1e3:7.2f} ms, measured "
                  f"{measured['median_s'] * 1e3:7.2f} ms [{measured['p10_s'] * 1e3:.2f}, "
                  f"{measured['p90_s'] * 1e3:.2f}] error {err:+.0%}", flush=True)
    print(f"median |error| {statistics.median(abs(r['rel_error']) for r in rows):.1%}")
    write_json({"records": rows}, args.out, "rpc_accuracy")


if __name__ == "__main__":
    main()
