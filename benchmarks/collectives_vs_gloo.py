"""Our from-scratch ring all-reduces beside gloo's own ``dist.all_reduce`` (book §2.5).

    .venv/bin/python benchmarks/collectives_vs_gloo.py [--worlds 2 4] [--repeats 20]

For each world size (one launch each) and float32 buffers of 64 KiB … 64 MiB, times
:func:`backends.collectives.all_reduce.ring_all_reduce` (the book's ring: one message a step),
:func:`~backends.collectives.all_reduce.segmented_ring_all_reduce` (each chunk in up to four
segments in flight at once, as gloo's own ring pipelines its chunks) and ``dist.all_reduce``
(SUM) in the same processes, their repeats interleaved by
:func:`backends.measure.measure_many` so that a slow spell of the machine hits all alike. All
go over gloo's TCP transport: ours as point-to-point messages, gloo's as its own pipelined
ring. Writes ``collectives_vs_gloo-<run id>.json`` and ``.csv`` (new files every run:
``_output.py``) (median/p10/p90 per implementation, nccl-tests algbw/busbw, the throughput ratios
ours/gloo = gloo's median time / ours, and ``*_ratio_p10`` from the 10th percentiles, the
quietest repeats) and prints a table. It asserts nothing: timing on a shared machine is noisy;
read the medians, and rerun when another job was busy.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch
import torch.distributed as dist

from backends.collectives.all_reduce import ring_all_reduce, segmented_ring_all_reduce
from backends.launch import spawn
from backends.measure import measure_many

from _output import add_out, write_csv, write_json

SIZES = [2**k for k in range(16, 27)]
"""Buffer sizes, bytes: 64 KiB … 64 MiB."""
OURS = ("ring", "segmented")
"""Our implementations, as named in the records: the book's ring and the segmented ring."""


def time_all(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Rank function: median/p10/p90 of ours and gloo's all-reduce for every size, s."""
    rows = []
    for nbytes in sizes:
        ring, segmented, theirs = (torch.zeros(nbytes // 4) for _ in range(3))  # zeros stay
        times = measure_many([lambda t=ring: ring_all_reduce(t),
                              lambda t=segmented: segmented_ring_all_reduce(t),
                              lambda t=theirs: dist.all_reduce(t)],
                             repeats=repeats, warmup=3)
        rows.append({"bytes": nbytes} | dict(zip((*OURS, "gloo"), times, strict=True)))
    return rows


def as_record(world: int, row: dict[str, Any]) -> dict[str, Any]:
    """One CSV/JSON record with nccl-tests bandwidths, GB/s: algbw = S/t, busbw = algbw·2(p−1)/p."""
    nbytes, factor = row["bytes"], 2 * (world - 1) / world
    record: dict[str, Any] = {"world": world, "bytes": nbytes, "count": nbytes // 4,
                              "type": "float32", "redop": "sum"}
    for name in (*OURS, "gloo"):
        t = row[name]
        record |= {f"{name}_median_s": t.median_s, f"{name}_p10_s": t.p10_s,
                   f"{name}_p90_s": t.p90_s,
                   f"{name}_algbw_GBps": nbytes / t.median_s / 1e9,
                   f"{name}_busbw_GBps": nbytes / t.median_s * factor / 1e9}
    for name in OURS:
        record[f"{name}_over_gloo"] = row["gloo"].median_s / row[name].median_s
        record[f"{name}_ratio_p10"] = row["gloo"].p10_s / row[name].p10_s  # quietest repeats
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=20)
    add_out(parser)
    args = parser.parse_args()
    records = []
    print(f"{'world':>5} {'size(B)':>10} {'ring(us)':>10} {'segm.(us)':>10} {'gloo(us)':>10} "
          f"{'gloo busbw':>10} {'ring/gloo':>9} {'segm./gloo':>10}")
    for world in args.worlds:
        rows = spawn(time_all, world, SIZES, args.repeats, timeout=180)[0]
        for row in rows:
            r = as_record(world, row)
            records.append(r)
            print(f"{world:>5} {r['bytes']:>10} {r['ring_median_s'] * 1e6:>10.0f} "
                  f"{r['segmented_median_s'] * 1e6:>10.0f} {r['gloo_median_s'] * 1e6:>10.0f} "
                  f"{r['gloo_busbw_GBps']:>10.2f} {r['ring_over_gloo']:>9.2f} "
                  f"{r['segmented_over_gloo']:>10.2f}")
    summary = [{"world": w} | {f"{name}_min_ratio_from_4MiB":
                               min(r[f"{name}_over_gloo"] for r in records
                                   if r["world"] == w and r["bytes"] >= 2**22)
                               for name in OURS}
               for w in args.worlds]
    for s in summary:
        print(f"world {s['world']}: ours/gloo throughput at >= 4 MiB, worst size: ring "
              f"{s['ring_min_ratio_from_4MiB']:.2f}, segmented ring "
              f"{s['segmented_min_ratio_from_4MiB']:.2f}", file=sys.stderr)
    write_csv(records, args.out, "collectives_vs_gloo")
    write_json({"records": records, "summary": summary}, args.out, "collectives_vs_gloo")


if __name__ == "__main__":
    main()
