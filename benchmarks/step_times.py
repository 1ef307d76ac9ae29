"""How long does one step of a collective take, call after call? (book §2.5; chapter 1)

    .venv/bin/python benchmarks/step_times.py [--worlds 2 4] [--bytes 65536] [--calls 60]
        [--slow-ms 2] [--out benchmarks/results]

Runs the real twins of the accuracy sweep's headline algorithms — ring and recursive-doubling
all-reduce, ring all-gather, binomial broadcast (``backends.collectives``) — ``--calls`` times
back to back, as the sustained benchmark does, with a :class:`backends.trace.Tracer`, and cuts
each rank's timeline at its receive completions: a *step* is the time from one completed
receive (or the start of the loop) to the next. A formula, and the simulator, price a step as
a latency plus bytes; on a host with fewer cores than busy threads the measured steps come in
two kinds, those of about that size and those in which a woken rank waited for the next
scheduler tick (4 ms at 250 Hz). Per algorithm and world this prints and writes
(``step_times-<run id>.json``/``.csv``, new files every run: ``_output.py``) the time per call,
the steps' median, mean, 90th percentile and the share of steps longer than ``--slow-ms`` with
their mean. The mean is what a sustained benchmark reports per call; the median is what a step
usually takes. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from backends.launch import spawn
from backends.measure import Timing
from backends.trace import Tracer
from lab.twins import get_twin

from _output import add_out, write_csv, write_json

TWINS = ("all_reduce.ring", "all_reduce.recursive_doubling", "all_gather.ring",
         "broadcast.binomial")
WARMUP_CALLS = 5


def trace_steps(nbytes: int, calls: int) -> dict[str, Any]:
    """Rank function: per twin, this rank's steps (s) and the loop's time per call (s). Each
    twin's real step allocates its buffers as the accuracy sweep does (``Twin.real_step``)."""
    import torch.distributed as dist

    out: dict[str, Any] = {}
    for name in TWINS:
        warm = get_twin(name).real_step(nbytes, None)
        for _ in range(WARMUP_CALLS):
            warm()
        tracer = Tracer()
        step = get_twin(name).real_step(nbytes, tracer)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(calls):
            step()
        per_call = (time.perf_counter() - start) / calls
        done = sorted(s.end for s in tracer.trace.spans if s.kind == "recv")
        edges = [start, *done]  # a root that only sends has no steps
        steps = [edges[i + 1] - edges[i] for i in range(len(done))]
        out[name] = {"per_call_s": per_call, "steps_s": steps}
    return out


def summarize(world: int, nbytes: int, name: str, ranks: list[dict[str, Any]],
              slow_s: float) -> dict[str, Any]:
    """One record: the slowest rank's time per call and every rank's steps pooled, s."""
    steps = [s for r in ranks for s in r[name]["steps_s"]]
    spread = Timing.from_samples(steps)
    slow = [s for s in steps if s > slow_s]
    return {"twin": name, "world": world, "bytes": nbytes,
            "per_call_s": max(r[name]["per_call_s"] for r in ranks), "steps": len(steps),
            "step_median_s": spread.median_s, "step_mean_s": statistics.fmean(steps),
            "step_p90_s": spread.p90_s, "slow_share": len(slow) / len(steps),
            "slow_mean_s": statistics.fmean(slow) if slow else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--bytes", type=int, default=2**16)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--slow-ms", type=float, default=2.0)
    add_out(parser)
    args = parser.parse_args()
    if any(w < 2 for w in args.worlds) or args.calls < 1 or args.slow_ms <= 0:
        parser.error("worlds must be at least 2, --calls at least 1, --slow-ms positive")
    if args.bytes < 4 * max(args.worlds):
        parser.error(f"--bytes must hold at least one float32 per rank ({4 * max(args.worlds)})")
    records = []
    print(f"{'twin':<31} {'p':>2} {'call ms':>8} {'median':>7} {'mean':>7} {'p90':>7} "
          f"{'slow':>6} {'slow mean':>9}")
    for world in args.worlds:
        ranks = spawn(trace_steps, world, args.bytes, args.calls, timeout=300)
        for name in ranks[0]:
            r = summarize(world, args.bytes, name, ranks, args.slow_ms / 1e3)
            records.append(r)
            print(f"{name:<31} {world:>2} {r['per_call_s'] * 1e3:>8.2f} "
                  f"{r['step_median_s'] * 1e3:>7.2f} {r['step_mean_s'] * 1e3:>7.2f} "
                  f"{r['step_p90_s'] * 1e3:>7.2f} {r['slow_share']:>6.0%} "
                  f"{r['slow_mean_s'] * 1e3:>9.2f}", flush=True)
    write_csv(records, args.out, "step_times")
    path = write_json({"bytes": args.bytes, "calls": args.calls, "slow_ms": args.slow_ms,
                       "records": records}, args.out, "step_times")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
