"""Our from-scratch real twins against PyTorch's built-ins: the speed ratio, same workload.

    .venv/bin/python benchmarks/versus_pytorch.py [--systems all_reduce,ddp,pipeline,…]
        [--worlds 2,4] [--quick] [--repeats 20] [--runs 3] [--out benchmarks/results]

For each system with a built-in counterpart, ours and PyTorch's are timed on the same workload
and world by the lab's own measurements (nothing here times a step), PyTorch's in the same
launch and interleaved in the same rounds unless said otherwise:

* ``all_reduce`` (ch. 2) — the book's ring and the segmented ring against gloo's
  ``dist.all_reduce`` on float32 buffers (``collectives_vs_gloo.time_all``, the same launch);
* ``ddp`` (ch. 5–6) — :class:`backends.ddp.DistributedDataParallel` against PyTorch's
  ``DistributedDataParallel`` at its default buckets (25 MiB, first 1 MiB), one SGD training
  step of the ``ddp`` twin's MLP (:func:`lab.ddp.measure_caps`);
* ``horovod`` (ch. 7) — PyTorch has no Horovod, so its nearest built-in, PyTorch's DDP at its
  default buckets, on the same MLP: our engine at Horovod's defaults (64 MiB fusion threshold,
  1 ms cycle: :func:`lab.horovod_sweep.measure_points`) and PyTorch's DDP in a second launch
  (:func:`lab.ddp.measure_caps`);
* ``pipeline`` (ch. 8–9) — GPipe and 1F1B of :class:`backends.pipeline.runtime.Pipeline`
  against ``torch.distributed.pipelining``'s ``ScheduleGPipe``/``Schedule1F1B`` on the same
  split (layers evenly over ``world`` stages; :func:`lab.pipeline.measure_sweep`);
* ``megatron`` (ch. 12) — forward + backward of our ``ParallelMLP`` against DTensor's
  ``ColwiseParallel``/``RowwiseParallel`` at tensor-parallel degree ``world``
  (:func:`lab.tensor_parallel.mlp_speed.mlp_speed`).

ZeRO (ch. 14) is missing: no lab function times PyTorch's ``ZeroRedundancyOptimizer`` or
``fully_shard`` (``tests/backends`` checks the numbers only).

Each record: ``system``, ``workload``, ``world``, ``reference`` (the built-in), ``run``, ours'
and PyTorch's median/p10/p90 (s), and ``ratio`` = ours / PyTorch's median (below 1: ours is
faster). ``--runs N`` repeats everything in fresh launches; the summary gives per system,
workload and world the median ratio over runs with its min–max. ``--quick`` takes small
workloads (a check that the script works, not a figure). Writes ``versus_pytorch-<run id>.json``
(``records``, ``summary``) and ``.csv`` (the records), new files every run (``_output.py``), and
prints a table. Asserts nothing about speed: on a shared machine read the medians, and rerun
when another job was busy.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backends.launch import spawn
from lab.units import format_size, parse_worlds

from _output import add_out, write_csv, write_json

Rows = list[dict[str, Any]]
"""One system's records at one world: each with ``workload``, ``reference``, ``ours`` and
``pytorch`` (dicts of ``median_s``, ``p10_s``, ``p90_s``)."""

MiB = 2**20
RINGS = {"ring": "the book's ring", "segmented": "segmented ring"}
"""Our all-reduces in ``collectives_vs_gloo``'s records, in words."""
HOROVOD_DEFAULTS = (64.0, 1.0)
"""Horovod's default fusion threshold (MiB) and cycle time (ms)."""


def _stats(timing: Any) -> dict[str, float]:
    """Median, p10, p90 (s) of a :class:`backends.measure.Timing` or of its ``as_dict``."""
    get = timing.get if isinstance(timing, dict) else lambda k: getattr(timing, k)
    return {k: get(k) for k in ("median_s", "p10_s", "p90_s")}


def all_reduce(world: int, quick: bool, repeats: int) -> Rows:
    """Our two rings and gloo's all-reduce at each buffer size, one launch."""
    from collectives_vs_gloo import OURS, time_all

    sizes = [64 * 1024, MiB] if quick else [64 * 1024, MiB, 16 * MiB]
    rows = spawn(time_all, world, sizes, repeats, timeout=180)[0]
    return [{"workload": f"{RINGS[name]}, float32 {format_size(row['bytes'])}",
             "reference": "dist.all_reduce (gloo)",
             "ours": _stats(row[name]), "pytorch": _stats(row["gloo"])}
            for row in rows for name in OURS]


def ddp(world: int, quick: bool, repeats: int) -> Rows:
    """Our DDP and PyTorch's at PyTorch's default buckets, one launch."""
    from lab.ddp import DEFAULT_BATCH, measure_caps
    from lab.strategies_ddp import WIDTHS

    widths = (256,) * 4 if quick else WIDTHS
    by = measure_caps(widths, DEFAULT_BATCH, world, [None], repeats)
    return [{"workload": _mlp(widths, DEFAULT_BATCH) + ", buckets 25 MiB",
             "reference": "DistributedDataParallel",
             "ours": _stats(by[("ours", None)]),
             "pytorch": _stats(by[("pytorch", None)])}]


def horovod(world: int, quick: bool, repeats: int) -> Rows:
    """Our Horovod at its defaults, then PyTorch's DDP at its defaults, on the same MLP."""
    from lab.ddp import measure_caps
    from lab.horovod_predict import DEFAULT_BATCH, DEFAULT_WIDTHS
    from lab.horovod_sweep import measure_points

    widths = (256,) * 4 if quick else DEFAULT_WIDTHS
    ours = measure_points(widths, DEFAULT_BATCH, world, [HOROVOD_DEFAULTS], repeats)[0]
    theirs = measure_caps(widths, DEFAULT_BATCH, world, [None], repeats)
    return [{"workload": _mlp(widths, DEFAULT_BATCH) + ", fusion 64 MiB, cycle 1 ms",
             "reference": "DistributedDataParallel (2nd launch)",
             "ours": _stats(ours), "pytorch": _stats(theirs[("pytorch", None)])}]


def pipeline(world: int, quick: bool, repeats: int) -> Rows:
    """GPipe and 1F1B, ours and ``torch.distributed.pipelining``'s, one launch."""
    from dataclasses import replace

    from lab.pipeline import PipelineSetup, measure_sweep
    from simulator.pipeline.balance import balance_cost

    base = PipelineSetup(layers=4, width=64, hidden=256, batch=32) if quick else PipelineSetup()
    base = replace(base, stages=world, microbatches=max(4, world),
                   balance=tuple(balance_cost([1.0] * base.layers, world)))
    setups = [replace(base, schedule=s) for s in ("gpipe", "1f1b")]
    got = measure_sweep(setups, repeats, builtin=True)
    return [{"workload": f"{s.schedule}, MLP {s.layers}×{s.width}→{s.hidden}, batch "
                         f"{s.batch}, {s.microbatches} micro-batches",
             "reference": "torch.distributed.pipelining",
             "ours": _stats(g["timing"]), "pytorch": _stats(g["builtin"])}
            for s, g in zip(setups, got, strict=True)]


def megatron(world: int, quick: bool, repeats: int) -> Rows:
    """Our Megatron MLP and DTensor's parallel styles, forward + backward, one launch."""
    from lab.tensor_parallel.mlp_speed import mlp_speed

    hidden, tokens = (64, 256) if quick else (256, 1024)
    got = mlp_speed(world, hidden, tokens, repeats)
    return [{"workload": f"MLP h={hidden}→{4 * hidden}→{hidden}, {tokens} tokens, fwd+bwd",
             "reference": "DTensor Colwise/RowwiseParallel",
             "ours": _stats(got["ours"]), "pytorch": _stats(got["dtensor"])}]


def _mlp(widths: tuple[int, ...], batch: int) -> str:
    """``MLP 6×1024², batch 32/rank``: a DDP/Horovod workload in words."""
    return f"MLP {len(widths) - 1}×{widths[0]}², batch {batch}/rank"


@dataclass(frozen=True)
class System:
    """A real twin with a built-in counterpart: ``measure(world, quick, repeats) → rows``."""

    name: str
    measure: Callable[[int, bool, int], Rows]


SYSTEMS = {s.name: s for s in (System("all_reduce", all_reduce), System("ddp", ddp),
                               System("horovod", horovod), System("pipeline", pipeline),
                               System("megatron", megatron))}


def record(system: str, world: int, run: int, row: dict[str, Any]) -> dict[str, Any]:
    """A flat CSV/JSON record of one row: both timings (s) and the ratio ours / PyTorch's."""
    ours, theirs = row["ours"], row["pytorch"]
    return {"system": system, "workload": row["workload"], "world": world,
            "reference": row["reference"], "run": run,
            **{f"ours_{k}": v for k, v in ours.items()},
            **{f"pytorch_{k}": v for k, v in theirs.items()},
            "ratio": ours["median_s"] / theirs["median_s"]}


def summarise(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per system, workload and world: the median ratio over runs, with min and max."""
    groups: dict[tuple[str, str, int], list[float]] = {}
    for r in records:
        groups.setdefault((r["system"], r["workload"], r["world"]), []).append(r["ratio"])
    return [{"system": s, "workload": w, "world": p, "runs": len(ratios),
             "median_ratio": statistics.median(ratios), "min_ratio": min(ratios),
             "max_ratio": max(ratios)} for (s, w, p), ratios in groups.items()]


def _ms(r: dict[str, Any], who: str) -> str:
    """``median (p10–p90)`` in ms."""
    return (f"{r[f'{who}_median_s'] * 1e3:9.3f} ({r[f'{who}_p10_s'] * 1e3:.3f}–"
            f"{r[f'{who}_p90_s'] * 1e3:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated, from {', '.join(SYSTEMS)}")
    parser.add_argument("--worlds", default="2,4", help="process counts, e.g. 2,4")
    parser.add_argument("--quick", action="store_true", help="small workloads, 5 repeats")
    parser.add_argument("--repeats", type=int, default=None, help="repeats (default 20)")
    parser.add_argument("--runs", type=int, default=1, help="fresh launches of everything")
    add_out(parser)
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems:
        parser.error(f"unknown system(s) {', '.join(unknown) or '(none)'}; choose from "
                     f"{', '.join(SYSTEMS)}")
    try:
        worlds = parse_worlds(args.worlds)
    except ValueError as e:
        parser.error(str(e))
    repeats = args.repeats or (5 if args.quick else 20)
    if repeats < 1 or args.runs < 1:
        parser.error("--repeats and --runs must be at least 1")
    print(f"{'system':<10} {'world':>5}  {'ours ms median (p10–p90)':<30} "
          f"{'PyTorch ms median (p10–p90)':<30} {'ours/PyTorch':>12}  workload")
    records = []
    for run in range(args.runs):
        for name in systems:
            for world in worlds:
                for row in SYSTEMS[name].measure(world, args.quick, repeats):
                    r = record(name, world, run, row)
                    records.append(r)
                    print(f"{name:<10} {world:>5}  {_ms(r, 'ours'):<30} "
                          f"{_ms(r, 'pytorch'):<30} {r['ratio']:>12.2f}  {r['workload']}",
                          flush=True)
    summary = summarise(records)
    if args.runs > 1:
        print(f"\nmedian ours/PyTorch over {args.runs} runs (min–max):")
        for s in summary:
            print(f"{s['system']:<10} {s['world']:>5}  {s['median_ratio']:.2f} "
                  f"({s['min_ratio']:.2f}–{s['max_ratio']:.2f})  {s['workload']}")
    write_csv(records, args.out, "versus_pytorch")
    print("wrote", write_json({"records": records, "summary": summary}, args.out,
                              "versus_pytorch"))


if __name__ == "__main__":
    main()
