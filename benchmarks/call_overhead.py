"""What a few microseconds of Python per message cost when ranks outnumber cores.

    .venv/bin/python benchmarks/call_overhead.py [--worlds 2 4] [--rounds 5]
        [--out benchmarks/results]

The lab's collectives post their messages on the process group itself
(:func:`backends.collectives.comm.post_send`/``post_recv``) and, untraced, hand back the
group's own work objects. The obvious way — ``dist.isend``/``dist.irecv`` and a small Python
object per message to wait on — costs a few microseconds more per post: ``dist.isend`` looks
up the default group, translates ranks and checks its arguments every time. A ring posts
twice a step. With one core per rank nobody notices; with four ranks (each a Python main
thread plus gloo's I/O thread) on two cores, a rank's CPU is paid again by every rank waiting
for a core, so the wall time grows by about twice the CPU added (benchmarks/NOTES.md, "Where four
ranks' time goes").

Side by side in one launch per world, alternating ``--rounds`` times so that a slow spell of
the machine hits both: ring all-reduce, recursive-doubling all-reduce and ring all-gather
(:mod:`backends.collectives`) as they are ("process group") and with :class:`Comm`'s posting
swapped for ``dist.isend``/``dist.irecv`` behind a wrapper object ("dist.isend"), each timed
in :data:`~simulator.core.calibration.SUSTAINED_REPEAT_S` repeats back to back, with the main
thread's CPU time (``time.thread_time``) beside the wall time.

Writes ``call_overhead-<run id>.json``/``.csv`` (new files every run: ``_output.py``): per world,
algorithm, size and way, the median wall time per call (slowest rank) and the median main-thread
CPU per call (mean over ranks), s, and the ratio dist.isend / process group of each. Prints a
table; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from backends.launch import spawn
from lab.sustained import CALLS_PROBES, sustained_calls

from _output import add_out, write_csv, write_json

SIZES = (2**16, 2**20)
"""Bytes per rank: where the Python shows (64 KiB) and where the bytes dominate (1 MiB)."""
ALGORITHMS = ("all_reduce.ring", "all_reduce.recursive_doubling", "all_gather.ring")
WAYS = ("process group", "dist.isend")


class _Waiter:
    """The wrapper a message got before: a Python object around the work, waited through."""

    def __init__(self, work: Any) -> None:  # stamped as the old wrapper stamped its start
        self._work, self._start = work, time.perf_counter()

    def wait(self) -> None:
        self._work.wait()


def _via_dist(self: Any, peer: int, tensor: Any, tag: int = 0, send: bool = True) -> Any:
    import torch.distributed as dist

    post = dist.isend if send else dist.irecv
    return _Waiter(post(tensor, self.ranks[peer], self.pg, tag))


def _call(name: str, nbytes: int) -> Any:
    """A closure running one call of algorithm ``name`` on ``nbytes`` per rank."""
    import torch
    import torch.distributed as dist

    from backends.collectives import all_gather, all_reduce

    p = dist.get_world_size()
    if name == "all_gather.ring":
        out, mine = torch.zeros(p * (nbytes // 4 // p)), torch.zeros(nbytes // 4 // p)
        return lambda: all_gather.ring_all_gather(out, mine)
    tensor = torch.rand(nbytes // 4)
    run = (all_reduce.ring_all_reduce if name == "all_reduce.ring"
           else all_reduce.recursive_doubling_all_reduce)
    return lambda: run(tensor)


def time_ways(sizes: tuple[int, ...], rounds: int, repeat_s: float
              ) -> dict[tuple[str, int, str], list[tuple[float, float]]]:
    """Rank function: (algorithm, size, way) → per round (wall s per call, main-thread CPU s
    per call), every way and case alternating in each round."""
    import torch.distributed as dist

    from backends.collectives.comm import Comm
    from backends.measure import measure

    fast = (Comm.isend, Comm.irecv)
    slow = (lambda self, dst, t, tag=0: _via_dist(self, dst, t, tag, send=True),
            lambda self, src, t, tag=0: _via_dist(self, src, t, tag, send=False))
    cases = [(a, n, _call(a, n)) for a in ALGORITHMS for n in sizes]
    out: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    try:
        for _ in range(rounds):
            for name, nbytes, call in cases:
                for way, (isend, irecv) in zip(WAYS, (fast, slow), strict=True):
                    Comm.isend = isend  # type: ignore[method-assign,assignment]
                    Comm.irecv = irecv  # type: ignore[method-assign,assignment]
                    # as many calls as fill repeat_s, agreed by all ranks (as the sweep does)
                    calls = sustained_calls(repeat_s, measure(call, repeats=CALLS_PROBES,
                                                              inner=1).samples_s)
                    dist.barrier()
                    wall0, cpu0 = time.perf_counter(), time.thread_time()
                    for _ in range(calls):
                        call()
                    wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
                    out.setdefault((name, nbytes, way), []).append((wall / calls, cpu / calls))
    finally:
        Comm.isend, Comm.irecv = fast  # type: ignore[method-assign]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rounds", type=int, default=5)
    add_out(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1 or any(w < 2 for w in args.worlds):
        parser.error("--rounds must be ≥ 1 and every world ≥ 2")
    from simulator.core.calibration import SUSTAINED_REPEAT_S

    rows: list[dict[str, object]] = []
    for world in args.worlds:
        per_rank = spawn(time_ways, world, SIZES, args.rounds, SUSTAINED_REPEAT_S,
                         backend="gloo", timeout=600)
        for name in ALGORITHMS:
            for nbytes in SIZES:
                got = {}
                for way in WAYS:
                    samples = [r[(name, nbytes, way)] for r in per_rank]
                    wall = statistics.median(max(s[i][0] for s in samples)
                                             for i in range(args.rounds))
                    cpu = statistics.median(statistics.fmean(s[i][1] for s in samples)
                                            for i in range(args.rounds))
                    got[way] = (wall, cpu)
                (fw, fc), (sw, sc) = got["process group"], got["dist.isend"]
                rows.append({"world": world, "algorithm": name, "bytes": nbytes,
                             "wall_pg_s": fw, "wall_isend_s": sw, "wall_ratio": sw / fw,
                             "cpu_pg_s": fc, "cpu_isend_s": sc, "cpu_ratio": sc / fc})
                print(f"p={world} {name:<30} {nbytes:>8} B  wall {fw * 1e6:7.1f} → "
                      f"{sw * 1e6:7.1f} µs ({sw / fw:4.2f}×)  main-thread CPU "
                      f"{fc * 1e6:6.1f} → {sc * 1e6:6.1f} µs ({sc / fc:4.2f}×)")
    write_json({"rounds": args.rounds, "records": rows}, args.out, "call_overhead")
    write_csv(rows, args.out, "call_overhead")
    return 0


if __name__ == "__main__":
    sys.exit(main())
