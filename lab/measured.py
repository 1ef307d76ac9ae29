"""``distml-lab compare TWIN --measured DIR``: a prediction beside measurements made elsewhere.

``python -m lab.run`` (under ``torchrun``, on one machine or several) leaves ``DIR/TWIN.json``:
the measured records and the cluster they ran on. This module predicts the very same points —
each record's world and size (a collective: as many calls back to back as were timed), or its
world and point (a strategy twin) — and merges them into comparison rows like ``compare``'s.

The prediction reads ``DIR/calibration.json`` when ``lab.run --calibrate`` measured one on
that cluster (its entries are read as this host's: they describe the cluster the records came
from, wherever the comparison runs), else the ``--calibration`` file of this machine. A
folder without the records, or records of another twin, is a one-line error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.units import UsageError
from simulator.core.calibration import Calibration, entry_key, this_host


def read_measured(folder: str | Path, twin: str) -> dict[str, Any]:
    """``DIR/TWIN.json`` as written by ``lab.run``, checked."""
    path = Path(folder) / f"{twin}.json"
    try:
        doc = json.loads(path.read_text())
        records = doc["records"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--measured {folder}: no readable {path.name} of lab.run "
                         f"({type(exc).__name__})") from None
    if not records or any(r.get("twin") != twin for r in records):
        raise UsageError(f"--measured {folder}: {path.name} holds no records of {twin}")
    return dict(doc)


def measured_calibration(folder: str | Path, fallback: str | None) -> Calibration:
    """The cluster's own calibration (``DIR/calibration.json``, re-keyed to this host), or
    the ``fallback`` file's."""
    path = Path(folder) / "calibration.json"
    if not path.exists():
        return Calibration.load(fallback)
    cluster = Calibration.load(path)
    entries = {entry_key(this_host(), e.backend, e.world_size, e.network): e
               for e in cluster.entries.values()}
    return Calibration(path, entries)


def compare_measured(twin_name: str, folder: str | Path, calibration: Calibration,
                     models: tuple[str, ...]) -> list[dict[str, Any]]:
    """Comparison rows: each measured record of ``DIR/TWIN.json`` with its prediction."""
    from lab.compare import _record
    from lab.predict import predict
    from lab.records import records_as_dicts
    from lab.strategies import get_strategy, merge
    from lab.twins import get_twin

    records = read_measured(folder, twin_name)["records"]
    strategy = get_strategy(twin_name)
    rows: list[dict[str, Any]] = []
    for world in sorted({r["world"] for r in records}):
        at = [r for r in records if r["world"] == world]
        measured = [{"median_s": r["measured_median_s"], "p10_s": r["measured_p10_s"],
                     "p90_s": r["measured_p90_s"], **{k: v for k, v in r.items() if not
                     k.startswith("measured_") or k == "measured_peak_bytes"}} for r in at]
        if strategy is not None:
            points = [r["point"][strategy.parameter] for r in at]
            predicted = strategy.predict(world, points, calibration, models)
            rows += [merge(strategy, world, point, p, m, models)
                     for point, p, m in zip(points, predicted, measured, strict=True)]
            continue
        twin = get_twin(twin_name)
        sizes = [r["bytes"] for r in at]
        calls = [r.get("calls", 1) for r in at]
        tiers = {m: predict(twin, world, sizes, "local", calibration, calls=calls,
                            model=m)  # type: ignore[arg-type]
                 for m in models}
        rows += records_as_dicts([_record(twin, world, {m: t[i] for m, t in tiers.items()},
                                          meas) for i, meas in enumerate(measured)])
    return rows


def show_measured(args: Any) -> None:
    """``distml-lab compare TWIN --measured DIR [--model …] [--json]``: predict, merge, print."""
    import statistics

    from lab.tables import format_table
    from simulator.host.factory import tiers_of

    if args.world is not None or args.sizes is not None or args.quick or args.out:
        raise UsageError("--measured compares the records in DIR as they are: drop --world, "
                         "--sizes, --quick and --out")
    read_measured(args.measured, args.twin)  # a bad folder fails before any prediction
    models = tuple(tiers_of(args.model))
    rows = compare_measured(args.twin, args.measured,
                            measured_calibration(args.measured, args.calibration), models)
    error = statistics.median(abs(r["rel_error"]) for r in rows)
    if args.json:
        print(json.dumps({"records": rows, "median_abs_rel_error": error}, indent=2))
        return
    key = "point" if "point" in rows[0] else "bytes"
    print(format_table([{**r, "point": str(r.get("point"))} for r in rows],
                       [("world", "world"), (key, key), ("predicted_s", "predicted(us)"),
                        ("measured_median_s", "measured(us)"), ("rel_error", "error")]))
    print(f"median |relative error|: {error:.1%}")
