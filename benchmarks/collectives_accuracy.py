"""Accuracy of the chapter-2 collective predictions on this machine.

    .venv/bin/python benchmarks/collectives_accuracy.py [--out benchmarks/results] [--repeats 25]
        [--twins …] [--worlds 2 4] [--calibration FILE] [--method sustained|single]
        [--chain rounds|calibration]

Calibrates worlds 2 and 4 into a fresh file (primitives only: ping-pong sweep, concurrent
exchanges, chains of dependent exchanges, reduction, copy, matmul; kept as
``OUT/collectives_calibration-<run id>.json``), then measures the four headline algorithms of the
issue — ring and recursive-doubling all-reduce, ring all-gather, binomial broadcast — at world 2
and 4 over 64 KiB–16 MiB.

``--method sustained`` (the default): one launch per world, every algorithm and size
interleaved in the same rounds, each repeat running its operation back to back for ~20 ms and
taking the time per call, the median over repeats reported (:func:`lab.sustained.measure_sustained`,
nccl-tests' way). With ``--chain rounds`` (the default) the primitives the predictions lean on
most — the chain of dependent exchanges, which prices a woken rank's wait, the concurrent
exchanges up to 16 MiB, which price the loopback bus by load, and the ping-pong (with its
sends' returns) and the stream one way of those sizes, which price a message alone — are timed
again in those same rounds, the same way, and the predictions use them (the entry so changed is
kept as ``OUT/collectives_calibration_rounds-<run id>.json``): this host's waits and copy rates
drift, and primitives measured minutes earlier miss the drift. ``--chain calibration`` predicts from
the calibration as it was measured. The ranks run under the launcher's scheduling policy
(``DISTML_RANK_SCHED``, ``batch`` unless set; see :func:`backends.launch.apply_rank_sched`).
Each point is predicted as it was measured: the simulated twin runs as many calls back to back
as the measurement did (the ``calls`` column) and the time per call is compared, with gloo's
receiver-driven sends (a send waits for the receiver's posted receive and its calibrated
receive-ready notice).
``--method single``: one launch per algorithm and world, timed the same way but without the
re-timed primitives, PyTorch's built-in timed side by side (:func:`lab.compare.compare`).
Writes every point (prediction, measured median/p10/p90, error, busbw) to
``collectives_accuracy-<run id>.json``/``.csv`` (new files every run, the calibrations' too:
``_output.py``) and prints the median |relative error| per twin and world.
Asserts nothing: read the medians, and run it twice to see how much this machine swings.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from lab.calibrate import calibrate
from lab.compare import compare, compare_sustained
from lab.records import median_abs_error, records_as_dicts
from lab.twins import get_twin

from _output import add_out, save_copy, write_csv, write_json

TWINS = ("all_reduce.ring", "all_reduce.recursive_doubling", "all_gather.ring",
         "broadcast.binomial")
SIZES = [2**k for k in range(16, 25, 2)]  # 64 KiB … 16 MiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--twins", nargs="+", default=list(TWINS), choices=TWINS)
    parser.add_argument("--worlds", nargs="+", type=int, default=[2, 4], choices=[2, 3, 4])
    parser.add_argument("--calibration", type=Path, default=None,
                        help="reuse this calibration file (default: calibrate afresh)")
    parser.add_argument("--method", choices=("sustained", "single"), default="sustained")
    parser.add_argument("--chain", choices=("rounds", "calibration"), default="rounds",
                        help="sustained: time the chain primitive in the measuring rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cal = args.calibration or Path(tmp) / "calibration.json"
        if args.calibration is None:
            for world in args.worlds:
                calibrate(world, path=cal)
            save_copy(cal, args.out, "collectives_calibration")
        if args.method == "sustained":
            rounds = Path(tmp) / "rounds.json" if args.chain == "rounds" else None
            records = compare_sustained(args.twins, args.worlds, SIZES, args.repeats, cal,
                                        chain_calibration=rounds)
            if rounds is not None:
                save_copy(rounds, args.out, "collectives_calibration_rounds")
        else:
            records = [r for name in args.twins for world in args.worlds
                       for r in compare(get_twin(name), [world], SIZES, args.repeats, cal,
                                        progress=False)]
    summary = []
    for name in args.twins:
        for world in args.worlds:
            got = [r for r in records if r.twin == name and r.world == world]
            summary.append({"twin": name, "world": world,
                            "median_abs_rel_error": median_abs_error(got)})
            print(f"{name:<31} p={world}: median |error| {median_abs_error(got):6.1%}   "
                  + " ".join(f"{r.rel_error:+.0%}" for r in got), flush=True)
    rows = records_as_dicts(records)
    write_csv(rows, args.out, "collectives_accuracy")
    write_json({"method": args.method, "records": rows, "summary": summary}, args.out,
               "collectives_accuracy")


if __name__ == "__main__":
    main()
