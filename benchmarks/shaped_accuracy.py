"""Accuracy of the collective predictions on the shaped network (a cluster on this laptop).

    flock -x /tmp/distml-measure.lock .venv/bin/python benchmarks/shaped_accuracy.py \\
        [--bandwidth 100mbit] [--worlds 2,3,4] [--hetero 100mbit,100mbit,100mbit,25mbit] \\
        [--repeats 5] [--out benchmarks/results]

Everything at once takes about 12 minutes; to keep each exclusive-lock run short, run one
world at a time (``--worlds 2 --hetero ''``: 2 min; 3 and 4 likewise:
3 and 3.5 min) and the slow link alone (``--worlds '' --sizes 262144,1048576 --repeats 3``).

Needs root and iproute2 (:mod:`backends.shaped`). For each world size it calibrates the shaped
network into a fresh file — primitives only: the rank 0 ↔ 1 ping-pong (α, and the links'
payload efficiency η), the concurrent shift (every rank receiving from its left neighbour while
sending to its right one: what acknowledgements cost a port that does both), the send buffer
(how much of a large message is still unsent when its blocking send returns), reduction, copy,
matmul — then measures ring all-reduce, ring all-gather,
binomial broadcast and pairwise all-to-all at 256 KiB–4 MiB, PyTorch's built-in beside ours,
and puts the simulator's prediction (:func:`~simulator.host.shaped_host_cluster`) beside
each point. Then the
heterogeneous case: one rank on a slower link, ring against tree all-reduce, predicted and
measured. Writes ``shaped_accuracy{tag}-<run id>.json``/``.csv`` (new files every run:
``_output.py``) and prints the median |relative error| per twin and world. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lab.calibrate import calibrate
from lab.compare import compare
from lab.records import median_abs_error, records_as_dicts
from lab.twins import get_twin

from _output import add_out, write_csv, write_json

TWINS = ("all_reduce.ring", "all_gather.ring", "broadcast.binomial", "all_to_all.pairwise")
HETERO_TWINS = ("all_reduce.ring", "all_reduce.binary_tree")
SIZES = [2**18, 2**20, 2**22]  # 256 KiB, 1 MiB, 4 MiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bandwidth", default="100mbit")
    parser.add_argument("--worlds", default="2,3,4")
    parser.add_argument("--twins", default=",".join(TWINS))
    parser.add_argument("--hetero", default="100mbit,100mbit,100mbit,25mbit",
                        help="per-rank rates of the heterogeneous case ('' to skip)")
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--repeats", type=int, default=5)
    add_out(parser)
    parser.add_argument("--tag", default="", help="suffix of the result names")
    args = parser.parse_args()
    from backends.shaped import missing

    why = missing()
    if why:
        sys.exit(f"shaped_accuracy: {why}")
    sizes = [int(s) for s in args.sizes.split(",")]
    records, summary = [], []
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.json"
        cases = [(args.bandwidth, int(w), args.twins.split(","))
                 for w in args.worlds.split(",") if w]
        if args.hetero:
            cases.append((args.hetero, len(args.hetero.split(",")), list(HETERO_TWINS)))
        for bandwidth, world, twins in cases:
            entry = calibrate(world, path=cal, network="shaped", bandwidth=bandwidth)
            print(f"calibrated {entry.key}: α {entry.latency_s * 1e6:.0f} µs, "
                  f"B {entry.bandwidth_Bps * 8 / 1e6:.1f} Mbit/s payload, shift "
                  f"{entry.bus_bandwidth_Bps * 8 / 1e6:.1f} Mbit/s aggregate, busy α "
                  f"{entry.bus_latency_s * 1e3:.2f} ms, send buffer "
                  f"{(entry.send_buffer_bytes or 0) / 1e6:.2f} MB", flush=True)
            for name in twins:
                got = compare(get_twin(name), [world], sizes, args.repeats, cal,
                              progress=False, network="shaped", bandwidth=bandwidth)
                records += [dict(r, bandwidth=bandwidth) for r in records_as_dicts(got)]
                summary.append({"twin": name, "world": world, "bandwidth": bandwidth,
                                "median_abs_rel_error": median_abs_error(got)})
                print(f"{name:<24} {bandwidth:<32} p={world}: median |error| "
                      f"{median_abs_error(got):6.1%}   "
                      + " ".join(f"{r.bytes >> 10}KiB {r.measured_median_s * 1e3:.1f}ms"
                                 f"/{r.predicted_s * 1e3:.1f}ms ({r.rel_error:+.0%})"
                                 for r in got), flush=True)
    homog = [s["median_abs_rel_error"] for s in summary if s["bandwidth"] == args.bandwidth]
    overall = statistics.median(homog) if homog else float("nan")
    print(f"median over twins and worlds at {args.bandwidth}: {overall:.1%} "
          f"({time.monotonic() - started:.0f} s)")
    write_csv(records, args.out, f"shaped_accuracy{args.tag}")
    write_json({"records": records, "summary": summary}, args.out,
               f"shaped_accuracy{args.tag}")


if __name__ == "__main__":
    main()
