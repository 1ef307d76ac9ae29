"""What a reduction costs among the ring's messages, and why (benchmarks/NOTES.md, "A reduction
among messages"; :mod:`simulator.host.reduction`).

    .venv/bin/python benchmarks/reduction_among_messages.py [--repeats 25] [--out DIR]

At two and four ranks (one launch each), every way and size interleaved in the same rounds
(:func:`backends.measure.measure_many`, each repeat running back to back for
:data:`~simulator.core.calibration.SUSTAINED_REPEAT_S`): the calibration's shift posted ahead
(:func:`backends.primitives.shift_ahead`, :data:`STEPS` steps a call, 16 KiB … 1 MiB a message), and
the same shift with a piece of work between each receive's end and the next send:

* ``reduce_received`` — the calibration's reducing shift (:func:`backends.primitives.reduce_ahead`):
  the received float32 message added into an accumulator;
* ``reduce_apart`` — ``a.add_(b)`` of as many bytes on two buffers of the rank's own;
* ``fill`` — ``a.fill_(1)`` of as many bytes: memory written, nothing read;
* ``tiny_op`` — ``add_`` of 16 floats: one torch operation, almost no bytes;
* ``spin`` — a Python loop as long as the reduction takes on an idle core (timed before the
  launch): CPU and nothing else;

and, not a step, ``reduce_alone``: the same reductions back to back, every rank at once. Per
way and size: time per step, and its ``extra`` over the shift (s) — what the work costs there.
Writes ``reduction_among_messages-<run id>.json``/``.csv`` (new files every run: ``_output.py``),
prints a table; asserts nothing — run it twice.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import torch

from backends.collectives.comm import Comm
from backends.launch import spawn

from _output import benchmark_args, write_records

SIZES = [2**k for k in range(14, 21, 2)]
"""Bytes per message: 16 KiB … 1 MiB, the chunks of the accuracy sweep's 64 KiB … 4 MiB."""
WORLDS = (2, 4)
STEPS = 12
"""Steps of the shift a call."""
WAYS = ("shift", "reduce_received", "reduce_apart", "fill", "tiny_op", "spin", "reduce_alone")


def spin(iterations: int) -> None:
    """A Python loop: CPU time and no memory."""
    for _ in range(iterations):
        pass


def spins_like_reduction(sizes: list[int]) -> dict[int, int]:
    """Loop iterations as long as one reduction of each size takes on this idle core."""
    count = 200_000
    start = time.perf_counter()
    spin(count)
    per_iteration = (time.perf_counter() - start) / count
    out = {}
    for n in sizes:
        a, b = torch.zeros(n // 4), torch.ones(n // 4)
        for _ in range(20):
            a.add_(b)
        start = time.perf_counter()
        for _ in range(200):
            a.add_(b)
        out[n] = max(1, round((time.perf_counter() - start) / 200 / per_iteration))
    return out


def shift_with(send: torch.Tensor, slots: torch.Tensor, work: Callable[[], Any]) -> None:
    """:data:`STEPS` steps of the shift posted ahead, ``work()`` between each receive's end
    and the next send (as :func:`lab.calibrate._posted_ahead` posts them)."""
    comm = Comm()
    p, r = comm.world_size, comm.rank
    left, right = (r - 1) % p, (r + 1) % p
    ahead = comm.irecv(left, slots[0])
    for step in range(STEPS):
        current = ahead
        sent = comm.isend(right, send)
        if step + 1 < STEPS:
            ahead = comm.irecv(left, slots[(step + 1) % 2])
        current.wait()
        work()
        sent.wait()


def repeated(work: Callable[[], Any]) -> None:
    """``work`` :data:`STEPS` times back to back."""
    for _ in range(STEPS):
        work()


def ways(sizes: list[int], repeats: int, spins: dict[int, int]) -> list[dict[str, Any]]:
    """Rank function: every way at every size; rank 0 returns the rows (time per step, s)."""
    import torch.distributed as dist

    from backends.measure import measure_many
    from backends.primitives import reduce_ahead, shift_ahead
    from simulator.core.calibration import SUSTAINED_REPEAT_S

    tiny, tinier = torch.zeros(16), torch.ones(16)
    steps: list[Callable[[], None]] = []
    for n in sizes:
        send, slots = torch.ones(n // 4), torch.empty(2, n // 4)
        a, b = torch.zeros(n // 4), torch.ones(n // 4)
        steps += [functools.partial(shift_ahead, send, slots, STEPS),
                  functools.partial(reduce_ahead, send, slots, torch.zeros(n // 4), STEPS),
                  functools.partial(shift_with, send, slots, functools.partial(a.add_, b)),
                  functools.partial(shift_with, send, slots, functools.partial(a.fill_, 1.0)),
                  functools.partial(shift_with, send, slots,
                                    functools.partial(tiny.add_, tinier)),
                  functools.partial(shift_with, send, slots,
                                    functools.partial(spin, spins[n])),
                  functools.partial(repeated, functools.partial(a.add_, b))]
    timings = iter(measure_many(steps, repeats=repeats, repeat_s=SUSTAINED_REPEAT_S))
    rows = []
    for n in sizes:
        row: dict[str, Any] = {"world": dist.get_world_size(), "bytes": n}
        for way in WAYS:
            t = next(timings)
            row[f"{way}_median_s"] = t.median_s / STEPS
            row[f"{way}_p10_s"] = t.p10_s / STEPS
            row[f"{way}_p90_s"] = t.p90_s / STEPS
        shift = row["shift_median_s"]
        row |= {f"{way}_extra_s": row[f"{way}_median_s"] - shift
                for way in WAYS[1:-1]}
        rows.append(row)
    return rows


def main() -> None:
    args = benchmark_args(__doc__, repeats=25)
    spins = spins_like_reduction(SIZES)
    records = []
    for world in WORLDS:
        records += spawn(ways, world, SIZES, args.repeats, spins, timeout=600)[0]
    print(f"{'world':>5} {'bytes/msg':>10} {'shift(us)':>10}   extra over the shift (us): "
          f"{'reduce recv':>11} {'reduce apart':>12} {'fill':>6} {'tiny op':>8} {'spin':>6}"
          f"   {'reduce alone (us)':>17}")
    for rec in records:
        extras = " ".join(f"{rec[f'{way}_extra_s'] * 1e6:>{w}.0f}" for way, w in
                          zip(WAYS[1:-1], (11, 12, 6, 8, 6), strict=True))
        print(f"{rec['world']:>5} {rec['bytes']:>10} {rec['shift_median_s'] * 1e6:>10.0f}"
              f"   {'':>26}{extras}   {rec['reduce_alone_median_s'] * 1e6:>17.1f}")
    write_records(records, args.out, "reduction_among_messages")


if __name__ == "__main__":
    main()
