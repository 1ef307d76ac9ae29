"""DDP step time, predicted vs measured, and our DDP against PyTorch's, over a bucket-size sweep.

    flock -x /tmp/distml-measure.lock .venv/bin/python benchmarks/ddp_accuracy.py \\
        [--worlds 2 4] [--repeats 10] [--out benchmarks/results]

1. calibrates worlds 2 and 4 into a fresh file (primitives only: ping-pong, exchanges,
   reduction, copy, matmul);
2. profiles the MLP's layers on this one process (forward and backward of each layer alone)
   and, per world, how much compute (matmuls) and communication (1 MiB exchanges, posted
   asynchronously) slow each other down when every rank runs both at once;
3. per world, one launch times a training step (forward, backward, SGD step) of our
   ``backends.ddp`` and of ``torch.nn.parallel.DistributedDataParallel`` at every bucket cap,
   repeats interleaved, and :mod:`simulator.ddp` predicts each point from 1 and 2 alone.

Writes ``ddp_accuracy-<run id>.json``/``.csv`` (new files every run: ``_output.py``) and prints,
per world, the median |relative error| of the prediction against each DDP and our step time over
PyTorch's. Asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from pathlib import Path

from lab.calibrate import calibrate
from lab.ddp import DEFAULT_BATCH, DEFAULT_WIDTHS, caps_mb, interference, profile_layers, sweep

from _output import add_out, write_csv, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH)
    args = parser.parse_args()
    widths = list(DEFAULT_WIDTHS)
    rows, summary = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.json"
        entries = {w: calibrate(w, path=cal) for w in args.worlds}
        for w, e in entries.items():
            print(f"calibration p={w}: α {e.latency_s * 1e6:.0f} µs, B {e.bandwidth_Bps / 1e9:.2f}"
                  f" GB/s, bus {e.bus_bandwidth_Bps / 1e9:.2f} GB/s (busy α "
                  f"{e.bus_latency_s * 1e6:.0f} µs), reduce {e.reduce_Bps / 1e9:.1f} GB/s, copy "
                  f"{e.memcpy_Bps / 1e9:.1f} GB/s, {e.cores} cores", flush=True)
        workload = profile_layers(widths, args.batch)
        contention = {w: interference(w) for w in args.worlds}
        caps = caps_mb(workload)
        print(f"MLP {widths[0]}x{len(widths) - 1} layers, {workload.param_bytes / 2**20:.1f} MiB,"
              f" batch {args.batch}; profiled compute {workload.compute_s * 1e3:.1f} ms/step on "
              f"one core; caps {caps} MiB", flush=True)
        for world in args.worlds:
            entry = entries[world]
            print(f"p={world}: while both run, compute goes at {contention[world].compute:.2f} "
                  f"and communication at {contention[world].comm:.2f} of their speed alone",
                  flush=True)
            points = sweep(entry, workload, widths, world, caps, args.repeats,
                           contention[world])
            for p in points:
                rows.append({**dataclasses.asdict(p), "ours_error": p.ours_error,
                             "pytorch_error": p.pytorch_error, "ratio": p.ratio,
                             "cores": entry.cores})
                print(f"p={world} cap {p.bucket_cap_mb:7.3f} MiB ({p.buckets:2d} buckets): "
                      f"predicted {p.predicted_s * 1e3:7.1f} ms (no overlap "
                      f"{p.predicted_no_overlap_s * 1e3:6.1f}, exposed comm "
                      f"{p.exposed_comm_s * 1e3:5.1f})  ours {p.ours_median_s * 1e3:7.1f} "
                      f"[{p.ours_p10_s * 1e3:.1f}–{p.ours_p90_s * 1e3:.1f}] "
                      f"({p.ours_error:+.0%})  pytorch {p.pytorch_median_s * 1e3:7.1f} "
                      f"({p.pytorch_error:+.0%})  ours/pytorch {p.ratio:.3f}  ours without "
                      f"overlap {p.ours_no_overlap_median_s * 1e3:.1f}", flush=True)
            line = {"world": world,
                    "median_abs_error_ours": statistics.median(abs(p.ours_error)
                                                               for p in points),
                    "median_abs_error_pytorch": statistics.median(abs(p.pytorch_error)
                                                                  for p in points),
                    "median_ratio": statistics.median(p.ratio for p in points),
                    "max_ratio": max(p.ratio for p in points)}
            summary.append(line)
            print(f"p={world}: median |error| ours {line['median_abs_error_ours']:.1%}, "
                  f"pytorch {line['median_abs_error_pytorch']:.1%}; ours/pytorch median "
                  f"{line['median_ratio']:.3f}, max {line['max_ratio']:.3f}", flush=True)
    write_csv(rows, args.out, "ddp_accuracy")
    write_json({"widths": widths, "batch": args.batch, "records": rows, "summary": summary,
                "calibration": {w: dataclasses.asdict(e) for w, e in entries.items()},
                "interference": {w: dataclasses.asdict(c) for w, c in contention.items()},
                "profile": [dataclasses.asdict(layer) for layer in workload.layers]},
               args.out, "ddp_accuracy")


if __name__ == "__main__":
    main()
