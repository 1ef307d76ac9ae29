"""The accuracy benchmarks' one runner: calibrate afresh, compare through the twin registry,
write every point, print the median error per twin, world and model tier.

Each ``benchmarks/<chapter>_accuracy.py`` names its chapter's twins and calls :func:`main`;
nothing here builds a cluster or times a step. A strategy twin (chapters 3–14) is compared by
:func:`lab.strategies.run_comparison`, a collective or point-to-point twin (chapters 1–2) by
:func:`lab.compare.compare` — the same functions ``distml-lab compare`` calls, so a benchmark's
point is the point a reader gets from the command line.

A **run** calibrates this machine into a fresh temporary file (:func:`lab.calibrate.calibrate`,
primitives only) at every process count the sweep starts
(:meth:`~lab.strategies.StrategyTwin.processes`; a collective at ``world`` starts ``world``),
then compares every twin on it. ``--runs N`` repeats the whole — calibration included — so the
spread between runs shows how much the machine itself swings. Every run's calibration file goes
into the results beside its points.

Writes ``OUT/<stem>-<run id>.json`` (``records``: every point of every run, with ``run``;
``summary``; ``calibrations``) and ``.csv`` (the records, a strategy's point as a column of its
own), new files every run (:mod:`_output`). Prints each point as it is compared — with the
chapter's own fields, where its script gives a hook — then per twin, world and tier the median
|relative error| over the points: each run's, and with three runs or more the median over runs
with the min–max. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lab.calibrate import calibrate, calibration_sweep
from lab.compare import compare
from lab.strategies import get_strategy, run_comparison
from lab.twins import all_twins, get_twin
from lab.units import parse_sizes, parse_worlds
from simulator.core.calibration import Calibration

from _output import add_out, write_csv, write_json

Extras = Callable[[dict[str, Any]], str]
"""A chapter's hook: one comparison row → a few words of its own fields (PyTorch's time, the
memory, …), printed after the point's line; ``""`` for nothing."""


@dataclass(frozen=True)
class Plan:
    """One twin's sweep in a run: its worlds, its points, the process counts to calibrate,
    and how to compare it on a calibration (``(calibration, repeats, models) → rows``)."""

    name: str
    worlds: list[int]
    processes: list[int]
    compare: Callable[[Calibration, int, Sequence[str]], list[dict[str, Any]]]
    label: Callable[[dict[str, Any]], str]


def collective_twins(chapter: str) -> list[str]:
    """The names of the registry's collective twins of ``chapter`` (``"1-2"``, ``"2"``), in
    its order."""
    return [t.name for t in all_twins() if t.chapter == chapter]


def collective_extras(row: dict[str, Any]) -> str:
    """A collective's hook: PyTorch's built-in timed in the same rounds (ours / PyTorch: below
    1 means ours is faster), where it has one, and nccl-tests' bus bandwidth."""
    builtin = row["builtin_median_s"]
    busbw = f"busbw {row['busbw_GBps']:.2f} GB/s"
    if builtin is None:
        return busbw
    return (f"PyTorch's {builtin * 1e3:.3f} ms (ours / PyTorch "
            f"{row['measured_median_s'] / builtin:.2f}), {busbw}")


def _points(text: str, like: Sequence[Any]) -> list[Any]:
    """``--points`` as values of the type of the twin's own points (``16`` → ``16.0`` for a
    float parameter; a grid's name stays a string)."""
    kind = type(like[0]) if like else str
    return [kind(p.strip()) for p in text.split(",")]


def plan(name: str, args: argparse.Namespace) -> Plan:
    """The sweep of the twin ``name`` asked for by ``args`` (its own default or quick sweep
    where ``--worlds``/``--points`` are not given); ``ValueError`` for a world it cannot run
    at or a point that is not one of its values."""
    strategy = get_strategy(name)
    if strategy is not None:
        worlds = args.worlds or list(strategy.quick_worlds if args.quick else strategy.worlds)
        bad = [w for w in worlds if not strategy.min_world <= w <= strategy.max_world]
        points = (_points(args.points, strategy.points) if args.points
                  else list(strategy.quick_points if args.quick else strategy.points))
        processes = sorted({strategy.processes(w, p) for w in worlds
                            for p in strategy.points_at(w, points)}) if strategy.calibrated else []
        parameter = strategy.parameter
        return Plan(name, _checked(name, worlds, bad), processes,
                    lambda cal, repeats, models: run_comparison(
                        strategy, worlds, points, repeats, cal, models),
                    lambda row: f"{parameter} {row['point'][parameter]}")
    twin = get_twin(name)
    worlds = args.worlds or list(twin.quick_worlds if args.quick else twin.worlds)
    sizes = (parse_sizes(args.points) if args.points
             else list(twin.quick_sizes if args.quick else twin.sizes))
    return Plan(name, _checked(name, worlds, [w for w in worlds if w < twin.min_world]),
                sorted({max(w, 2) for w in worlds}),
                lambda cal, repeats, models: [asdict(r) for r in compare(
                    twin, worlds, sizes, repeats, cal, progress=False, network=args.network,
                    bandwidth=args.bandwidth, models=models)],
                lambda row: f"{row['bytes']} B")


def _checked(name: str, worlds: list[int], bad: list[int]) -> list[int]:
    """``worlds``, or a ``ValueError`` naming the ones ``name`` cannot run at."""
    if bad:
        raise ValueError(f"{name} cannot run at world {', '.join(map(str, bad))}")
    return worlds


def tiers(model: str) -> tuple[str, ...]:
    """``--model`` as the tiers to predict in."""
    return ("textbook", "host") if model == "both" else (model,)


def errors(rows: Sequence[dict[str, Any]], tier: str, both: bool) -> list[float]:
    """|relative error| of ``tier`` at every row that has one."""
    key = f"rel_error_{tier}" if both else "rel_error"
    return [abs(r[key]) for r in rows if r.get(key) is not None]


def point_line(p: Plan, row: dict[str, Any], models: Sequence[str], extras: Extras | None
               ) -> str:
    """One compared point: measured median [p10–p90], each tier's prediction and error."""
    both = len(models) > 1
    text = (f"{p.name} p={row['world']} {p.label(row)}: measured "
            f"{row['measured_median_s'] * 1e3:.3f} ms [{row['measured_p10_s'] * 1e3:.3f}–"
            f"{row['measured_p90_s'] * 1e3:.3f}]")
    for m in models:
        pred, err = ((row[f"predicted_{m}_s"], row[f"rel_error_{m}"]) if both
                     else (row["predicted_s"], row["rel_error"]))
        text += f", {m} {pred * 1e3:.3f} ms ({err:+.1%})"
    more = extras(row) if extras else ""
    return f"{text}; {more}" if more else text


def summarise(plans: Sequence[Plan], rows: Sequence[dict[str, Any]], runs: int,
              models: Sequence[str]) -> list[dict[str, Any]]:
    """Per twin, world and tier: each run's median |error| over its points, and their median,
    min and max."""
    def median_error(twin: str, world: int, run: int, tier: str) -> float | None:
        found = errors([r for r in rows if (r["twin"], r["world"], r["run"]) == (twin, world, run)],
                       tier, len(models) > 1)
        return statistics.median(found) if found else None

    out = []
    for p in plans:
        for world in p.worlds:
            for tier in models:
                per_run = [median_error(p.name, world, run, tier) for run in range(runs)]
                got = [e for e in per_run if e is not None]
                if got:
                    out.append({"twin": p.name, "world": world, "tier": tier,
                                "per_run": per_run, "median": statistics.median(got),
                                "min": min(got), "max": max(got)})
    return out


def summary_line(s: dict[str, Any]) -> str:
    """A summary entry as text: each run's median, or with three runs or more the median over
    runs (min–max)."""
    runs = [e for e in s["per_run"] if e is not None]
    value = (f"{s['median']:.1%} ({s['min']:.1%}–{s['max']:.1%})" if len(runs) >= 3
             else " / ".join(f"{e:.1%}" for e in runs))
    return f"{s['twin']:<31} p={s['world']} {s['tier']:<8} median |error| {value}"


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """A row for the CSV: a strategy's point (``{parameter: value}``) as a column of its own."""
    return {**{k: v for k, v in row.items() if k != "point"}, **row.get("point", {})}


def parse(doc: str, names: Sequence[str], more: Sequence[str], shaped: bool,
          points: str | None, repeats: int) -> argparse.Namespace:
    """The flags every accuracy benchmark takes (``--bandwidth`` on a shaped network);
    ``--twins`` picks among ``names`` (the default) and ``more``; ``points`` and ``repeats``
    are the script's defaults (``None``: each twin's own points)."""
    parser = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()))
    parser.add_argument("--twins", default=",".join(names),
                        help=f"comma-separated, of {', '.join([*names, *more])} (default: "
                        f"{', '.join(names)})")
    parser.add_argument("--worlds", type=parse_worlds,
                        help="world sizes, e.g. 2,4 (default: each twin's own)")
    sweep = parser.add_mutually_exclusive_group()
    own = points or "each twin's own"
    sweep.add_argument("--points", help="the swept values, comma-separated (a collective's "
                       f"sizes: 64KiB,1MiB or 64KiB:16MiB; default: {own})")
    sweep.add_argument("--quick", action="store_true",
                       help="each twin's quick worlds and points, and a quick calibration")
    parser.add_argument("--repeats", type=int, default=repeats, help="timed repeats per point")
    parser.add_argument("--model", choices=("textbook", "host", "both"), default="both")
    parser.add_argument("--runs", type=int, default=1,
                        help="independent runs, each with its own fresh calibration")
    if shaped:
        parser.add_argument("--bandwidth", default="100mbit",
                            help="the links' rate, or one per rank (100mbit,25mbit,…)")
    add_out(parser)
    args = parser.parse_args()
    if args.points is None and not args.quick:
        args.points = points
    args.network = "shaped" if shaped else "loopback"
    args.bandwidth = args.bandwidth if shaped else None
    args.names = args.twins.split(",")
    unknown = sorted(set(args.names) - {*names, *more})
    if unknown or args.repeats < 1 or args.runs < 1:
        parser.error(f"unknown twins {unknown}" if unknown else "--repeats and --runs must be "
                     "at least 1")
    return args


def main(doc: str, stem: str, names: Sequence[str], extras: Extras | None = None,
         shaped: bool = False, more: Sequence[str] = (), points: str | None = None,
         repeats: int = 20) -> None:
    """Compare the twins ``names`` (or those of them and of ``more`` that ``--twins`` picks)
    over ``--runs`` fresh calibrations — on a shaped network of ``--bandwidth`` where
    ``shaped`` — write and print. ``points`` and ``repeats`` are the script's defaults of
    ``--points`` (``None``: each twin's own) and ``--repeats``."""
    args = parse(doc, names, more, shaped, points, repeats)
    if shaped:
        from backends.shaped import missing

        if why := missing():
            sys.exit(f"{stem}: {why}")
    try:
        plans = [plan(name, args) for name in args.names]
    except ValueError as err:  # a world a twin cannot run at, a point that is no value
        print(f"{stem}: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    models = tiers(args.model)
    processes = sorted({n for p in plans for n in p.processes})
    rows: list[dict[str, Any]] = []
    calibrations = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix=f"{stem}-") as tmp:
            path = Path(tmp) / "calibration.json"
            for n in processes:
                print(f"run {run}: calibrating {n} ranks ...", file=sys.stderr, flush=True)
                calibrate(n, path=path, network=args.network, bandwidth=args.bandwidth,
                          **calibration_sweep(args.quick))
            calibration = Calibration.load(path)
            calibrations.append(json.loads(path.read_text()) if path.exists() else {})
            for p in plans:
                got = [{"run": run, **r} for r in p.compare(calibration, args.repeats, models)]
                for row in got:
                    print(point_line(p, row, models, extras), flush=True)
                rows += got
    summary = summarise(plans, rows, args.runs, models)
    for s in summary:
        print(summary_line(s))
    write_csv([flat(r) for r in rows], args.out, stem)
    write_json({"runs": args.runs, "model": args.model, "network": args.network,
                "bandwidth": args.bandwidth, "records": rows, "summary": summary,
                "calibrations": calibrations}, args.out, stem)
