"""Accuracy of the DataParallel prediction on this machine (book ch. 4).

    flock -x /tmp/distml-measure.lock .venv/bin/python benchmarks/data_parallel_accuracy.py \\
        [--out benchmarks/results] [--repeats 7]

For each configuration (the 21 MB MLP of :mod:`lab.data_parallel` at a batch of 256 and of
1000 — which 3 replicas split unevenly, 334/334/332) and 1–4 replicas: one thread measures the
primitives (per-chunk forward/backward, loss, SGD step, copy and sum rates into fresh memory),
the simulated twin predicts the iteration from them, and the real twin is timed
(median/p10/p90 over repeats). Writes ``data_parallel_accuracy-<run id>.json`` and ``.csv`` (new
files every run: ``_output.py``) with every point and the median |relative error| per
configuration and overall. Asserts nothing: timing on a shared machine is noisy; read the
medians.
"""

from __future__ import annotations

import argparse
import statistics

from lab.data_parallel import DEFAULT_WIDTHS, compare

from _output import add_out, write_csv, write_json

CONFIGS = ((DEFAULT_WIDTHS, 256), (DEFAULT_WIDTHS, 1000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rows, summary = [], []
    for widths, batch in CONFIGS:
        got = compare(widths, batch, (1, 2, 3, 4), args.repeats)
        rows += got
        err = statistics.median(abs(r["rel_error"]) for r in got)
        summary.append({"widths": list(widths), "batch": batch, "median_abs_rel_error": err})
        for r in got:
            print(f"batch {batch:>5} replicas {r['replicas']}: predicted "
                  f"{r['predicted_s'] * 1e3:7.1f} ms, measured {r['measured_median_s'] * 1e3:7.1f}"
                  f" ms (p10 {r['measured_p10_s'] * 1e3:.1f}, p90 "
                  f"{r['measured_p90_s'] * 1e3:.1f}), error {r['rel_error']:+.1%}")
        print(f"batch {batch}: median |error| {err:.1%}")
    overall = statistics.median(abs(r["rel_error"]) for r in rows)
    print(f"overall median |error| {overall:.1%} over {len(rows)} points")
    flat = [{k: v for k, v in r.items() if k not in ("phases", "widths")}
            | {f"predicted_{k}_s": v for k, v in r["phases"].items()} for r in rows]
    write_csv(flat, args.out, "data_parallel_accuracy")
    write_json({"records": rows, "summary": summary, "median_abs_rel_error": overall},
               args.out, "data_parallel_accuracy")


if __name__ == "__main__":
    main()
