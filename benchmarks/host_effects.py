"""What each host effect is worth: the collectives' accuracy with all effects, without each one.

    .venv/bin/python benchmarks/host_effects.py [--calibration FILE] [--repeats 25] [--quick]
        [--out benchmarks/results]

The host tier is the textbook tier plus named host effects (:mod:`simulator.host.effects`).
This benchmark measures the real twins of the collectives' accuracy sweep *once* — the twins,
worlds and sizes of ``collectives_accuracy.py``, each twin launched once per world and timed as
``distml-lab compare`` times it (:func:`lab.compare.run_real`) — then predicts every point from
one calibration in several models:

* ``textbook`` — the textbook tier (:func:`simulator.host.factory.textbook_cluster`);
* ``host`` — the host tier with every effect;
* ``host tier`` — the effects the host tier applies by default (those that pay);
* ``without <effect>`` — the host tier less that effect and every effect that requires it
  (:func:`simulator.host.effects.without`): the ablation.

Each prediction runs as many calls back to back as the measurement did and takes the time per
call, as ``compare`` predicts. The table has a row per effect: the median |relative error| over
all points with every effect, without this one, the change (percentage points; positive: the
effect makes the model better), and the textbook tier's. An effect whose primitive the
calibration did not measure (the partners' swap at two ranks) changes nothing.

Without ``--calibration`` each world is calibrated afresh into a file kept as
``OUT/host_effects_calibration-<run id>.json``. Every point and every model's prediction goes to
``host_effects-<run id>.json``/``.csv``, the table to the JSON's ``effects``. ``--quick``: two
twins at world 2 and two sizes, a handful of repeats — a smoke test of the pipeline (about a
minute with a calibration given), not a figure. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collectives_accuracy import SIZES, TWINS

from lab.calibrate import calibrate, calibration_sweep
from lab.compare import run_real
from lab.twins import get_twin
from simulator.core.calibration import Calibration, CalibrationEntry
from simulator.core.hardware import Cluster
from simulator.host.effects import HOST_EFFECTS, without
from simulator.host.factory import local_cluster

from _output import add_out, save_copy, write_csv, write_json

WORLDS = (2, 4)
"""The accuracy sweep's worlds (``collectives_accuracy.py``'s default)."""
QUICK_TWINS = ("all_reduce.ring", "broadcast.binomial")
QUICK_SIZES = (2**16, 2**22)  # 64 KiB, 4 MiB
QUICK_REPEATS = 5


def models(entry: CalibrationEntry, world: int) -> dict[str, Cluster]:
    """Every model compared, by column name: the textbook tier, every host effect (``host``),
    the host tier as it is applied by default (:data:`~simulator.host.effects.HOST_TIER`) and
    every effect but one, for each (solved once each for this entry and world)."""
    out = {"textbook": local_cluster(entry, world, "textbook"),
           "host": local_cluster(entry, world, "host", effects=HOST_EFFECTS),
           "host tier": local_cluster(entry, world, "host")}
    for name in HOST_EFFECTS:
        out[f"without {name}"] = local_cluster(entry, world, "host", effects=without(name))
    return out


def measure(names: Sequence[str], world: int, sizes: Sequence[int],
            repeats: int) -> dict[str, list[dict[str, Any]]]:
    """The real twins' timings at one world, by twin (one launch per twin, as ``compare``)."""
    return {name: run_real(get_twin(name), world, sizes, repeats) for name in names}


def points(names: Sequence[str], world: int, sizes: Sequence[int],
           measured: dict[str, list[dict[str, Any]]], clusters: dict[str, Cluster]
           ) -> list[dict[str, Any]]:
    """One row per twin and size: the measurement and every model's prediction (s per call,
    ``calls`` calls back to back) and relative error."""
    rows = []
    for name in names:
        twin = get_twin(name)
        for nbytes, meas in zip(sizes, measured[name], strict=True):
            calls, median = meas.get("calls", 1), meas["median_s"]
            row: dict[str, Any] = {"twin": name, "world": world, "bytes": nbytes,
                                   "calls": calls, "measured_median_s": median,
                                   "measured_p10_s": meas["p10_s"],
                                   "measured_p90_s": meas["p90_s"]}
            for model, cluster in clusters.items():
                predicted = twin.simulate(cluster, nbytes, calls=calls).makespan_s / calls
                row[f"predicted {model} s"] = predicted
                row[f"rel_error {model}"] = (predicted - median) / median
            rows.append(row)
    return rows


def median_error(rows: Sequence[dict[str, Any]], model: str) -> float:
    """Median |relative error| of ``model`` over ``rows``."""
    return statistics.median(abs(row[f"rel_error {model}"]) for row in rows)


def effects_table(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A row per effect: what it leaves out with it, and the median |error| with all effects,
    without it, the change (without − with: what the effect is worth) and the textbook's."""
    host, book = median_error(rows, "host"), median_error(rows, "textbook")
    table = []
    for name in HOST_EFFECTS:
        less = median_error(rows, f"without {name}")
        dropped = sorted(set(HOST_EFFECTS) - without(name) - {name})
        table.append({"effect": name, "also_dropped": dropped, "host": host,
                      "without": less, "change": less - host, "textbook": book})
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--calibration", type=Path, default=None,
                        help="reuse this calibration file (default: calibrate afresh)")
    parser.add_argument("--quick", action="store_true",
                        help="two twins, world 2, two sizes, few repeats: a smoke test")
    args = parser.parse_args()
    names, worlds, sizes = ((QUICK_TWINS, (2,), QUICK_SIZES) if args.quick
                            else (TWINS, WORLDS, SIZES))
    repeats = QUICK_REPEATS if args.quick else args.repeats
    with tempfile.TemporaryDirectory() as tmp:
        path = args.calibration or Path(tmp) / "calibration.json"
        if args.calibration is None:
            for world in worlds:
                calibrate(world, path=path, **calibration_sweep(args.quick))
            save_copy(path, args.out, "host_effects_calibration")
        calibration = Calibration.load(path)
        rows = []
        for world in worlds:
            measured = measure(names, world, sizes, repeats)  # once: every model reads it
            clusters = models(calibration.entry(world), world)
            rows += points(names, world, sizes, measured, clusters)
    table = effects_table(rows)
    write_csv(rows, args.out, "host_effects")
    write_json({"twins": list(names), "worlds": list(worlds), "sizes": list(sizes),
                "repeats": repeats, "effects": table, "records": rows}, args.out,
               "host_effects")
    print(f"{len(rows)} points; median |error|: every effect {table[0]['host']:.1%}, "
          f"host tier (the effects that pay) {median_error(rows, 'host tier'):.1%}, "
          f"textbook tier {table[0]['textbook']:.1%}")
    print("| effect | all effects | without it | change | textbook |")
    print("|---|---|---|---|---|")
    for row in table:
        also = f" (and {', '.join(row['also_dropped'])})" if row["also_dropped"] else ""
        print(f"| {row['effect']}{also} | {row['host']:.1%} | {row['without']:.1%} | "
              f"{100 * row['change']:+.1f} pp | {row['textbook']:.1%} |")


if __name__ == "__main__":
    main()
