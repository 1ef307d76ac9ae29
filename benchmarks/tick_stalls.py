"""The four-millisecond stall: single exchanges timed call by call under both rank policies.

    .venv/bin/python benchmarks/tick_stalls.py [--calls 400] [--launches 2]
        [--out benchmarks/results]

On a host with fewer cores than threads (two ranks, each a Python main thread plus gloo's I/O
thread, on two cores) a gloo exchange sometimes stalls for a whole scheduler tick: each rank's
main thread writes its message holding its connection's lock, the write wakes the *other*
rank's I/O thread onto the writer's own core, the woken thread preempts the writer, finds its
own connection's lock taken by its own (equally preempted) main thread, and spins on a
level-triggered ``epoll`` until the tick (4 ms at 250 Hz) preempts it (chapter 2, "The
four-millisecond stall"). Under ``SCHED_BATCH`` a woken thread does not preempt the running
one, and the stall goes (:func:`backends.launch.apply_rank_sched`, the lab's default).

Every call is timed on its own (``time.perf_counter`` around it, on rank 0) — a batch of calls
would average the stalls away — for each rank policy in turn, ``--launches`` times
alternating so that a slow spell of the machine hits both:

* world 2: a swap (``irecv``, ``isend``, wait for both) with the partner, of 4 KiB, 128 KiB
  and 2 MiB per message;
* world 4: one step of the chain round a ring (the same, receiving from the left and sending
  right), 4 KiB.

Writes ``tick_stalls-<run id>.json``/``.csv`` (new files every run: ``_output.py``): per policy,
world and size the mean, median and p90 per call (s), the share of calls over :data:`STALL_S`,
and the ratio of the means normal / batch. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from backends.launch import RANK_SCHED_ENV, RANK_SCHED_POLICIES, spawn

from _output import add_out, write_csv, write_json

STALL_S = 2e-3
"""A call longer than this stalled, s: ten times a normal call, half a tick."""
CASES = {2: (4096, 131072, 2**21), 4: (4096,)}
"""World size → bytes per message."""


def time_calls(sizes: tuple[int, ...], calls: int) -> dict[int, list[float]]:
    """Rank function: for each size, ``calls`` single steps (receive from the left, send
    right, wait for both — a swap at world 2) timed one by one; rank 0's times, s."""
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    left, right = (rank - 1) % world, (rank + 1) % world
    out: dict[int, list[float]] = {}
    for nbytes in sizes:
        send, recv = torch.zeros(nbytes // 4), torch.empty(nbytes // 4)
        times = []
        dist.barrier()
        for _ in range(calls):
            start = time.perf_counter()
            for work in (dist.irecv(recv, left), dist.isend(send, right)):
                work.wait()
            times.append(time.perf_counter() - start)
        out[nbytes] = times
    return out


def summary(policy: str, world: int, nbytes: int, times: list[float]) -> dict[str, Any]:
    """One record: the distribution of single calls."""
    ordered = sorted(times)
    return {"policy": policy, "world": world, "bytes": nbytes, "calls": len(times),
            "mean_s": statistics.fmean(times), "median_s": statistics.median(times),
            "p90_s": ordered[int(0.9 * (len(ordered) - 1))],
            "stalled_share": sum(t > STALL_S for t in times) / len(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--launches", type=int, default=2)
    add_out(parser)
    args = parser.parse_args()
    if args.calls < 1 or args.launches < 1:
        parser.error("--calls and --launches must be at least 1")
    pooled: dict[tuple[str, int, int], list[float]] = {}
    for _ in range(args.launches):
        for policy in reversed(RANK_SCHED_POLICIES):  # normal first, then batch
            for world, sizes in CASES.items():
                got = spawn(time_calls, world, sizes, args.calls, timeout=300,
                            env={RANK_SCHED_ENV: policy})[0]
                for nbytes, times in got.items():
                    pooled.setdefault((policy, world, nbytes), []).extend(times)
    records = [summary(p, w, n, t) for (p, w, n), t in sorted(pooled.items(),
                                                                key=lambda kv: kv[0][1:])]
    means = {(r["policy"], r["world"], r["bytes"]): r["mean_s"] for r in records}
    for r in records:
        r["mean_ratio_normal_over_batch"] = (means[("normal", r["world"], r["bytes"])]
                                             / means[("batch", r["world"], r["bytes"])])
    print(f"{'world':>5} {'bytes':>8} {'policy':>7} {'mean(ms)':>9} {'median(ms)':>10} "
          f"{'p90(ms)':>8} {'stalled':>8}")
    for r in records:
        print(f"{r['world']:>5} {r['bytes']:>8} {r['policy']:>7} {r['mean_s'] * 1e3:>9.3f} "
              f"{r['median_s'] * 1e3:>10.3f} {r['p90_s'] * 1e3:>8.3f} "
              f"{r['stalled_share']:>8.1%}")
    write_csv(records, args.out, "tick_stalls")
    path = write_json({"records": records, "stall_s": STALL_S}, args.out, "tick_stalls")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
