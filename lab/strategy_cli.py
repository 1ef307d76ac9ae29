"""``distml-lab compare`` for strategy twins (:mod:`lab.strategies`), checked before any work.

The common flags mean what they mean for a collective: ``--world`` the world sizes (within the
twin's ``min_world`` … ``max_world``), ``--quick`` the short sweep, ``--repeats``, ``--json``,
``--out`` (``TWIN.csv`` and ``TWIN.json``, existing files kept unless ``--force``) and
``--calibration``. ``--sizes`` has no meaning for a strategy and is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lab.checks import check_backend, check_network, check_real_ranks
from lab.strategies import StrategyTwin, run_comparison
from lab.units import UsageError, parse_worlds


def refuse_outside_compare(twin: StrategyTwin, command: str) -> None:
    """``simulate`` and ``run`` take collectives; a strategy twin is compared whole."""
    raise UsageError(f"{twin.name} is a strategy twin (chapter {twin.chapter}): "
                     f"'distml-lab compare {twin.name}' predicts and measures it; "
                     f"'{command}' takes the collectives")


def compare_strategy(args: argparse.Namespace, twin: StrategyTwin) -> None:
    """Check everything, calibrate where needed, compare, print and write."""
    from lab.compare import ensure_calibrated
    from lab.outputs import check_new_files
    from lab.records import write_csv, write_json
    from simulator.core.calibration import check_writable

    if args.sizes is not None:
        raise UsageError(f"{twin.name} sweeps {twin.parameter}, not message sizes: drop --sizes")
    worlds = parse_worlds(args.world) if args.world is not None else list(
        twin.quick_worlds if args.quick else twin.worlds)
    for world in worlds:
        if not twin.min_world <= world <= twin.max_world:
            raise UsageError(f"invalid world {world} for {twin.name}: from {twin.min_world} "
                             f"to {twin.max_world} {twin.world_unit}")
    points = list(twin.quick_points if args.quick else twin.points)
    ranks = sorted({twin.processes(w, p) for w in worlds for p in points})
    check_real_ranks(ranks)
    check_backend(args.backend, max(worlds))
    if args.backend != "gloo":
        raise UsageError(f"{twin.name} runs on CPU processes: use --backend gloo")
    network, _ = check_network(args, worlds)
    if network != "loopback":
        raise UsageError(f"{twin.name} runs on loopback: drop --network")
    names = [f"{twin.name}.csv", f"{twin.name}.json"]
    if args.out is not None:
        check_new_files(Path(args.out), names, args.force)
    if twin.calibrated:
        check_writable(args.calibration)
        ensure_calibrated(ranks, "gloo", args.calibration, quick=args.quick,
                          log=lambda m: print(m, file=sys.stderr))
    print(f"{twin.name}: worlds {worlds}, {twin.parameter} {points} ...", file=sys.stderr)
    rows = run_comparison(twin, worlds, points, args.repeats, args.calibration)
    if args.out is not None:
        out = Path(args.out)
        write_csv([_flat(r) for r in rows], out / names[0])
        write_json({"records": rows}, out / names[1])
    if args.json:
        print(json.dumps({"records": rows}, indent=2))
        return
    print(f"{'world':>5} {twin.parameter:>10} {'predicted(ms)':>14} {'measured(ms)':>13} "
          f"{'p10(ms)':>9} {'p90(ms)':>9} {'error':>8}")
    for r in rows:
        print(f"{r['world']:>5} {r['point'][twin.parameter]!s:>10} "
              f"{r['predicted_s'] * 1e3:>14.2f} {r['measured_median_s'] * 1e3:>13.2f} "
              f"{r['measured_p10_s'] * 1e3:>9.2f} {r['measured_p90_s'] * 1e3:>9.2f} "
              f"{r['rel_error']:>+8.1%}")


def _flat(r: dict[str, Any]) -> dict[str, Any]:
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
