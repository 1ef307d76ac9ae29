"""Our from-scratch ring all-reduce beside gloo's own ``dist.all_reduce`` (book §2.5).

    .venv/bin/python benchmarks/collectives_vs_gloo.py [--worlds 2 4] [--repeats 20]

For each world size (one launch each) and float32 buffers of 64 KiB … 64 MiB, times
:func:`backends.collectives.all_reduce.ring_all_reduce` and ``dist.all_reduce`` (SUM) in the
same processes, their repeats interleaved by :func:`backends.measure.measure_many` so that a
slow spell of the machine hits both alike. Both go over gloo's TCP transport: ours as
point-to-point messages, gloo's as its own pipelined ring. Writes ``collectives_vs_gloo.json``
and ``.csv`` (median/p10/p90 per implementation, nccl-tests algbw/busbw, the throughput ratio
ours/gloo = gloo's median time / ours, and ``ratio_p10`` from the 10th percentiles, the quietest
repeats) and prints a table. It asserts nothing: timing on a shared machine is noisy; read the
medians, and rerun when another job was busy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from backends.collectives.all_reduce import ring_all_reduce
from backends.launch import spawn
from backends.measure import measure_many
from lab.compare import write_csv, write_json

SIZES = [2**k for k in range(16, 27)]
"""Buffer sizes, bytes: 64 KiB … 64 MiB."""


def time_both(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Rank function: median/p10/p90 of ours and gloo's all-reduce for every size, s."""
    rows = []
    for nbytes in sizes:
        ours, theirs = torch.zeros(nbytes // 4), torch.zeros(nbytes // 4)  # zeros stay zeros
        mine, gloo = measure_many([lambda t=ours: ring_all_reduce(t),
                                   lambda t=theirs: dist.all_reduce(t)],
                                  repeats=repeats, warmup=3)
        rows.append({"bytes": nbytes, "ours": mine, "gloo": gloo})
    return rows


def as_record(world: int, row: dict[str, Any]) -> dict[str, Any]:
    """One CSV/JSON record with nccl-tests bandwidths, GB/s: algbw = S/t, busbw = algbw·2(p−1)/p."""
    nbytes, factor = row["bytes"], 2 * (world - 1) / world
    record: dict[str, Any] = {"world": world, "bytes": nbytes, "count": nbytes // 4,
                              "type": "float32", "redop": "sum"}
    for name in ("ours", "gloo"):
        t = row[name]
        record |= {f"{name}_median_s": t.median_s, f"{name}_p10_s": t.p10_s,
                   f"{name}_p90_s": t.p90_s,
                   f"{name}_algbw_GBps": nbytes / t.median_s / 1e9,
                   f"{name}_busbw_GBps": nbytes / t.median_s * factor / 1e9}
    record["ratio_ours_over_gloo"] = row["gloo"].median_s / row["ours"].median_s
    record["ratio_p10"] = row["gloo"].p10_s / row["ours"].p10_s  # the quietest repeats
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    records = []
    print(f"{'world':>5} {'size(B)':>10} {'ours(us)':>10} {'gloo(us)':>10} "
          f"{'ours busbw':>10} {'gloo busbw':>10} {'ours/gloo':>9} {'(p10)':>6}")
    for world in args.worlds:
        rows = spawn(time_both, world, SIZES, args.repeats, timeout=120)[0]
        for row in rows:
            r = as_record(world, row)
            records.append(r)
            print(f"{world:>5} {r['bytes']:>10} {r['ours_median_s'] * 1e6:>10.0f} "
                  f"{r['gloo_median_s'] * 1e6:>10.0f} {r['ours_busbw_GBps']:>10.2f} "
                  f"{r['gloo_busbw_GBps']:>10.2f} {r['ratio_ours_over_gloo']:>9.2f} "
                  f"{r['ratio_p10']:>6.2f}")
    summary = [{"world": w, "min_ratio_from_4MiB": min(r["ratio_ours_over_gloo"]
                                                       for r in records
                                                       if r["world"] == w and r["bytes"] >= 2**22)}
               for w in args.worlds]
    for s in summary:
        print(f"world {s['world']}: ours/gloo throughput at >= 4 MiB, worst size: "
              f"{s['min_ratio_from_4MiB']:.2f}", file=sys.stderr)
    write_csv(records, args.out / "collectives_vs_gloo.csv")
    write_json({"records": records, "summary": summary}, args.out / "collectives_vs_gloo.json")


if __name__ == "__main__":
    main()
