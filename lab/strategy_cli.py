"""``distml-lab simulate``, ``run`` and ``compare`` for strategy twins (:mod:`lab.strategies`),
each checked in full before any work.

The common flags mean what they mean for a collective: ``--world`` the world sizes (within the
twin's ``min_world`` … ``max_world``), ``--quick`` the short sweep, ``--json``; ``simulate`` and
``compare`` take ``--model`` (``textbook``, ``host`` or ``both`` tiers, see
:mod:`simulator.host.factory`) and ``--calibration``; ``run`` and ``compare`` take
``--repeats``; ``compare`` writes ``--out`` (``TWIN.csv`` and ``TWIN.json``, existing files
kept unless ``--force``). ``--sizes`` has no meaning for a strategy and is refused; so are any
network but loopback, and (for ``simulate``) any cluster but this machine's.

``simulate`` predicts only — it reads the calibration and never measures one: a calibrated
twin without one at the ranks it needs is told to run ``distml-lab calibrate --world N``.
``run`` measures only, and needs no calibration. ``compare`` calibrates what is missing
first, then does both.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.checks import check_backend, check_network, check_real_ranks
from lab.strategies import (
    StrategyTwin,
    measurement_rows,
    prediction_rows,
    run_comparison,
)
from lab.units import UsageError, parse_worlds
from simulator.core.calibration import Calibration, CalibrationError, default_calibration_path
from simulator.host.factory import tiers_of


def _sweep(args: argparse.Namespace, twin: StrategyTwin) -> tuple[list[int], list[Any]]:
    """The worlds and points asked for, checked; ``--sizes`` and networks refused."""
    if args.sizes is not None:
        raise UsageError(f"{twin.name} sweeps {twin.parameter}, not message sizes: drop --sizes")
    worlds = parse_worlds(args.world) if args.world is not None else list(
        twin.quick_worlds if args.quick else twin.worlds)
    for world in worlds:
        if not twin.min_world <= world <= twin.max_world:
            raise UsageError(f"invalid world {world} for {twin.name}: from {twin.min_world} "
                             f"to {twin.max_world} {twin.world_unit}")
    points = list(twin.quick_points if args.quick else twin.points)
    network, _ = check_network(args, worlds, machine=False)
    if network != "loopback":
        raise UsageError(f"{twin.name} runs on loopback: drop --network")
    return worlds, points


def _ranks(twin: StrategyTwin, worlds: Sequence[int], points: Sequence[Any]) -> list[int]:
    """Every process count a point of the sweep starts (the calibrated world sizes)."""
    return sorted({twin.processes(w, p) for w in worlds for p in points})


def _calibration(args: argparse.Namespace, twin: StrategyTwin, ranks: Sequence[int]
                 ) -> Calibration:
    """The calibration file read once, with an entry at every one of ``ranks`` where the
    twin's prediction reads it; else a one-line error naming the command that measures them.
    A twin that reads none (``calibrated=False``) gets an empty one: its file is not read."""
    if not twin.calibrated:
        return Calibration(Path(args.calibration) if args.calibration is not None
                           else default_calibration_path(), {})
    calibration = Calibration.load(args.calibration)
    missing = []
    for world in ranks:
        try:
            calibration.entry(world, "gloo")
        except CalibrationError:
            missing.append(world)
    if missing:
        worlds = ",".join(map(str, missing))
        raise UsageError(f"{twin.name} is predicted from this machine's calibration, and "
                         f"{calibration.path} has none at {worlds} ranks: run "
                         f"'distml-lab calibrate --world {worlds}' first")
    return calibration


def simulate_strategy(args: argparse.Namespace, twin: StrategyTwin) -> None:
    """Check everything (the calibration included), predict, print."""
    worlds, points = _sweep(args, twin)
    if args.cluster != "local":
        raise UsageError(f"{twin.name} is predicted on this machine's calibrated cluster: "
                         f"drop --cluster {args.cluster}")
    ranks = _ranks(twin, worlds, points)
    check_real_ranks(ranks)  # the prediction's primitives run on that many processes
    calibration = _calibration(args, twin, ranks)
    models = tiers_of(args.model)
    print(f"{twin.name}: worlds {worlds}, {twin.parameter} {points}, model "
          f"{args.model} ...", file=sys.stderr)
    rows = [r for world in worlds
            for r in prediction_rows(twin, world, points, calibration, models)]
    if args.json:
        print(json.dumps({"records": rows}, indent=2))
        return
    tiers = [(f"predicted_{m}_s", f"{m}(ms)") for m in models] if len(models) > 1 else [
        ("predicted_s", "predicted(ms)")]
    _table(twin, rows, tiers)


def run_strategy(args: argparse.Namespace, twin: StrategyTwin) -> None:
    """Check everything, measure, print (no calibration read or made)."""
    worlds, points = _sweep(args, twin)
    check_real_ranks(_ranks(twin, worlds, points))
    check_backend(args.backend, max(worlds))
    if args.backend != "gloo":
        raise UsageError(f"{twin.name} runs on CPU processes: use --backend gloo")
    print(f"{twin.name}: worlds {worlds}, {twin.parameter} {points} ...", file=sys.stderr)
    rows = [r for world in worlds
            for r in measurement_rows(twin, world, points, args.repeats)]
    if args.json:
        print(json.dumps({"records": rows}, indent=2))
        return
    _table(twin, rows, [("measured_median_s", "measured(ms)"), ("measured_p10_s", "p10(ms)"),
                        ("measured_p90_s", "p90(ms)")])


def compare_strategy(args: argparse.Namespace, twin: StrategyTwin) -> None:
    """Check everything, calibrate where needed, compare, print and write."""
    from lab.compare import ensure_calibrated
    from lab.outputs import check_new_files
    from lab.records import write_csv, write_json
    from simulator.core.calibration import check_writable

    worlds, points = _sweep(args, twin)
    ranks = _ranks(twin, worlds, points)
    check_real_ranks(ranks)
    check_backend(args.backend, max(worlds))
    if args.backend != "gloo":
        raise UsageError(f"{twin.name} runs on CPU processes: use --backend gloo")
    names = [f"{twin.name}.csv", f"{twin.name}.json"]
    if args.out is not None:
        check_new_files(Path(args.out), names, args.force)
    if twin.calibrated:
        check_writable(args.calibration)
        ensure_calibrated(ranks, "gloo", args.calibration, quick=args.quick,
                          log=lambda m: print(m, file=sys.stderr))
    calibration = _calibration(args, twin, ranks)
    models = tiers_of(args.model)
    print(f"{twin.name}: worlds {worlds}, {twin.parameter} {points}, model "
          f"{args.model} ...", file=sys.stderr)
    rows = run_comparison(twin, worlds, points, args.repeats, calibration, models)
    if args.out is not None:
        out = Path(args.out)
        write_csv([flat_row(r) for r in rows], out / names[0])
        write_json({"records": rows}, out / names[1])
    if args.json:
        print(json.dumps({"records": rows}, indent=2))
        return
    measured = [("measured_median_s", "measured(ms)"), ("measured_p10_s", "p10(ms)"),
                ("measured_p90_s", "p90(ms)")]
    if len(models) > 1:
        _table(twin, rows, [*((f"predicted_{m}_s", f"{m}(ms)") for m in models), *measured,
                            *((f"rel_error_{m}", f"{m} error") for m in models)])
    else:
        _table(twin, rows, [("predicted_s", "predicted(ms)"), *measured,
                            ("rel_error", "error")])


def _table(twin: StrategyTwin, rows: Sequence[dict[str, Any]],
           columns: Sequence[tuple[str, str]]) -> None:
    """Rows as a text table: world, the twin's parameter, then ``columns`` — seconds as ms
    (keys ending ``_s``), relative errors as percentages."""
    heads = [f"{'world':>5}", f"{twin.parameter:>12}", *(f"{h:>14}" for _, h in columns)]
    print(" ".join(heads))
    for r in rows:
        cells = [f"{r['world']:>5}", f"{r['point'][twin.parameter]!s:>12}"]
        for key, _ in columns:
            value = r[key]
            cells.append(f"{value * 1e3:>14.2f}" if key.endswith("_s") else f"{value:>+14.1%}")
        print(" ".join(cells))


def flat_row(r: dict[str, Any]) -> dict[str, Any]:
    """A row for CSV: the point's parameter as a column of its own."""
    return {**{k: v for k, v in r.items() if k != "point"}, **r["point"]}


def in_chapter(chapter: str, wanted: str) -> bool:
    """Whether a twin's chapter (``"14"``, or a range ``"1-2"``) includes ``wanted``."""
    lo, _, hi = chapter.partition("-")
    try:
        return int(lo) <= int(wanted) <= int(hi or lo)
    except ValueError:
        return chapter == wanted


def list_twins(args: argparse.Namespace) -> None:
    """``distml-lab list [--chapter N] [--json]``: collectives' and strategies' twins."""
    from lab.strategies import all_strategies
    from lab.twins import all_twins

    rows = [{**t.describe(), "kind": "collective"} for t in all_twins()]
    rows += [t.describe() for t in all_strategies()]
    if args.chapter is not None:
        if not args.chapter.isascii() or not args.chapter.isdigit():
            raise UsageError(f"invalid --chapter {args.chapter!r}: a chapter number, like 5")
        rows = [t for t in rows if in_chapter(t["chapter"], args.chapter)]
    if args.json:
        print(json.dumps({"twins": rows}, indent=2))
        return
    for t in rows:
        print(f"{t['name']:<33} ch {t['chapter']:<4} {t['summary']}")


TIER_FLAGS = ("--world", "--quick", "--model", "--calibration", "--json")
"""The flags of ``simulate`` for a strategy twin on this machine."""


def strategy_request(rest: Sequence[str]) -> bool:
    """Whether ``simulate horovod|megatron REST`` asks for the strategy twin on this machine
    rather than the whole-configuration simulator of that name (:mod:`lab.simulate_models`,
    which also takes ``--world``): ``REST`` uses only :data:`TIER_FLAGS` and says ``--quick``
    or ``--model textbook|host|both`` (a tier, not a GPT)."""
    i, twin = 0, False
    while i < len(rest):
        flag, eq, inline = rest[i].partition("=")
        if flag not in TIER_FLAGS:
            return False
        if flag in ("--quick", "--json"):
            twin |= flag == "--quick"
            i += 1
            continue
        value = inline if eq else (rest[i + 1] if i + 1 < len(rest) else "")
        if flag == "--model":
            if value not in ("textbook", "host", "both"):
                return False
            twin = True
        i += 1 if eq else 2
    return twin
