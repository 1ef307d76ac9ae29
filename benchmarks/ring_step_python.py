"""What a ring step's Python costs among four ranks on two cores (book §2.5; benchmarks/NOTES.md, "A
view a step").

    .venv/bin/python benchmarks/ring_step_python.py [--repeats 15] [--out benchmarks/results]

Four ranks, one launch, every way and size interleaved in the same rounds
(:func:`backends.measure.measure_many`, each repeat running back to back for
:data:`~simulator.core.calibration.SUSTAINED_REPEAT_S`); the same messages — ``p − 1`` steps of
a ring's shift, 16 KiB … 1 MiB a message — time per step:

* ``all_gather`` — :func:`backends.collectives.all_gather.ring_all_gather_chunks` as it is:
  the chunk sent is the view the last receive filled, and a step's one new view is cut after
  its send is posted;
* ``views_before_send`` — the loop as it was until this benchmark: each step cuts its send's
  view and its next receive's view before posting them, so a view stands between a receive's
  end and the next send;
* ``views_made_before`` — every view cut before the call is timed: the floor, no view at all;
* ``shift_ahead`` — the calibration's primitive (:func:`backends.primitives.shift_ahead`) with as
  many steps, the one the collectives' model prices a ring step by;
* ``reduce_scatter`` — :func:`~backends.collectives.reduce_scatter.ring_reduce_scatter_chunks`
  of the same chunks (float32): the same messages, each step's receive reduced into the chunk
  the next step sends;
* ``unreduced`` — the same reduce-scatter with its reductions skipped (a ``Comm`` whose
  ``reduce`` does nothing): its messages and views alone;
* ``all_reduce`` — :func:`backends.collectives.all_reduce.ring_all_reduce` of the same buffer,
  per step of its ``2(p − 1)``;
* ``reduce`` — one message's reduction, ``acc.add_(incoming)`` into a chunk of a buffer of the
  all-reduce's size, every rank at once (not a step: the CPU a reduce-scatter step adds);
* ``reduce_ahead`` — the calibration's reducing shift (:func:`backends.primitives.reduce_ahead`)
  with as many steps: the shift whose every received message is reduced before the next
  send, the primitive the model prices a reduction by (:mod:`simulator.host.reduction`).

Writes ``ring_step_python-<run id>.json``/``.csv`` (new files every run: ``_output.py``) (median,
p10, p90 per way and size, and each way's ratio to ``shift_ahead``) and prints a table; asserts
nothing — run it twice.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.distributed import ReduceOp

from backends.collectives.comm import Comm
from backends.collectives.reduce_scatter import ring_reduce_scatter_chunks
from backends.launch import spawn
from backends.measure import Timing

from _output import benchmark_args, write_records

SIZES = [2**k for k in range(14, 21, 2)]
"""Bytes per message: 16 KiB … 1 MiB, the chunks of the accuracy sweep's 64 KiB … 4 MiB."""
WAYS = ("all_gather", "views_before_send", "views_made_before", "reduce_scatter", "unreduced",
        "all_reduce", "reduce", "reduce_ahead", "shift_ahead")
PER_CALL = {"all_reduce": 2}
"""Steps per call, in units of ``p − 1``, where not one."""
WORLD = 4


def views_before_send(buf: torch.Tensor, bounds: list[tuple[int, int]]) -> None:
    """The ring all-gather's loop cutting both of a step's views before posting them."""
    comm = Comm()
    p, mine = comm.world_size, comm.rank
    right, left = (mine + 1) % p, (mine - 1) % p

    def chunk(i: int) -> torch.Tensor:
        return buf[bounds[i % p][0]:bounds[i % p][1]]

    sends, ahead = [], None
    for step in range(p - 1):
        current = ahead or comm.irecv(left, chunk(mine - step - 1))
        sends.append(comm.isend(right, chunk(mine - step)))
        ahead = comm.irecv(left, chunk(mine - step - 2)) if step + 2 < p else None
        current.wait()
    for work in sends:
        work.wait()


def views_made_before(outgoing: list[torch.Tensor], into: list[torch.Tensor]) -> None:
    """The same messages with every view already cut: step ``s`` sends ``outgoing[s]`` and
    receives into ``into[s]``."""
    comm = Comm()
    p = comm.world_size
    right, left = (comm.rank + 1) % p, (comm.rank - 1) % p
    ahead, sends = comm.irecv(left, into[0]), []
    for step in range(p - 1):
        current = ahead
        sends.append(comm.isend(right, outgoing[step]))
        if step + 2 < p:
            ahead = comm.irecv(left, into[step + 1])
        current.wait()
    for work in sends:
        work.wait()


class Unreduced(Comm):
    """A ``Comm`` whose reductions are skipped: a reduce-scatter's messages and views alone."""

    def reduce(self, acc: torch.Tensor, incoming: torch.Tensor, op: ReduceOp) -> None:
        pass


def reduce_scatter(buf: torch.Tensor, bounds: list[tuple[int, int]],
                   comm_class: type[Comm] = Comm) -> None:
    """The ring reduce-scatter's steps over ``buf`` cut at ``bounds``, SUM, with a ``Comm``
    made for the call (:class:`Unreduced`: every reduction skipped)."""
    ring_reduce_scatter_chunks(comm_class(), buf, bounds, ReduceOp.SUM)


def reductions(buf: torch.Tensor, incoming: torch.Tensor, p: int) -> None:
    """``p − 1`` reductions of ``incoming`` into the chunks of ``buf``, one a chunk."""
    k = incoming.numel()
    for i in range(p - 1):
        buf[i * k:(i + 1) * k].add_(incoming)


def ring_steps(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Rank function: every way at every size; rank 0 returns the rows (time per step)."""
    import torch.distributed as dist

    from backends.collectives.all_gather import ring_all_gather_chunks
    from backends.collectives.all_reduce import ring_all_reduce
    from backends.measure import measure_many
    from backends.primitives import reduce_ahead, shift_ahead
    from simulator.collectives.chunks import chunk_bounds
    from simulator.core.calibration import SUSTAINED_REPEAT_S

    p, r = dist.get_world_size(), dist.get_rank()
    steps: list[Any] = []
    for n in sizes:
        buf = torch.zeros(p * n, dtype=torch.uint8)
        bounds = chunk_bounds(p * n, p)
        views = [buf[lo:hi] for lo, hi in bounds]
        floats = torch.zeros(p * n // 4)  # the reduce-scatter's and all-reduce's buffer
        float_bounds = chunk_bounds(p * n // 4, p)
        steps += [lambda buf=buf, bounds=bounds: ring_all_gather_chunks(Comm(), buf, bounds, r),
                  functools.partial(views_before_send, buf, bounds),
                  functools.partial(views_made_before,
                                    [views[(r - s) % p] for s in range(p - 1)],
                                    [views[(r - s - 1) % p] for s in range(p - 1)]),
                  functools.partial(reduce_scatter, floats, float_bounds),
                  functools.partial(reduce_scatter, floats, float_bounds, Unreduced),
                  functools.partial(ring_all_reduce, torch.zeros(p * n // 4)),
                  functools.partial(reductions, torch.zeros(p * n // 4), torch.ones(n // 4), p),
                  functools.partial(reduce_ahead, torch.ones(n // 4), torch.empty(2, n // 4),
                                    torch.zeros(n // 4), p - 1),
                  functools.partial(shift_ahead, torch.zeros(n, dtype=torch.uint8),
                                    torch.empty(2, n, dtype=torch.uint8), p - 1)]
    timings = iter(measure_many(steps, repeats=repeats, repeat_s=SUSTAINED_REPEAT_S))
    rows = []
    for n in sizes:
        row: dict[str, Any] = {"bytes": n}
        for way in WAYS:
            t = next(timings)
            k = (p - 1) * PER_CALL.get(way, 1)
            row[way] = Timing(t.median_s / k, t.p10_s / k, t.p90_s / k, ())
        rows.append(row)
    return rows


def as_record(row: dict[str, Any]) -> dict[str, Any]:
    """One CSV/JSON record: median/p10/p90 of each way per step, s, and ratios to the shift."""
    record: dict[str, Any] = {"bytes": row["bytes"]}
    for way in WAYS:
        record |= row[way].columns(way)
    shift = row["shift_ahead"].median_s
    return record | {f"{way}_over_shift": row[way].median_s / shift for way in WAYS[:-1]}


def main() -> None:
    args = benchmark_args(__doc__)
    rows = spawn(ring_steps, WORLD, SIZES, args.repeats, timeout=300)[0]
    records = [as_record(row) for row in rows]
    print(f"{'bytes/msg':>10} {'shift(us/step)':>15} {'all_gather':>11} {'views before':>13} "
          f"{'views made':>11} {'red.-scatter':>13} {'unreduced':>10} {'all-reduce':>11} "
          f"{'reduce':>7} {'red. ahead':>11}"
          "   (ratios to the shift)")
    for rec in records:
        print(f"{rec['bytes']:>10} {rec['shift_ahead_median_s'] * 1e6:>15.0f} "
              f"{rec['all_gather_over_shift']:>11.2f} {rec['views_before_send_over_shift']:>13.2f} "
              f"{rec['views_made_before_over_shift']:>11.2f} "
              f"{rec['reduce_scatter_over_shift']:>13.2f} {rec['unreduced_over_shift']:>10.2f} "
              f"{rec['all_reduce_over_shift']:>11.2f} "
              f"{rec['reduce_over_shift']:>7.2f} {rec['reduce_ahead_over_shift']:>11.2f}")
    write_records(records, args.out, "ring_step_python")


if __name__ == "__main__":
    main()
