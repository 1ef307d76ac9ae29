"""``distml-lab report``: the tour a newcomer runs first (``make demo``).

1. Calibrate this machine if it has no calibration yet for the world sizes needed.
2. For every registered twin: its quick sweep, predicted and measured (``compare``), written as
   CSV and JSON, with a plot; one point's predicted and measured timelines as a PNG and as
   Chrome traces (open them in https://ui.perfetto.dev).
3. ``index.md``: the calibration, and per twin a table of prediction beside measurement.

Everything goes to a hidden folder beside ``out`` first and moves into place only when complete,
so an interrupted report never leaves a half-written one. ``out`` may be new, empty or a report
the lab wrote before (which is replaced); anything else is refused before any work starts
(:mod:`lab.outputs`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from lab.compare import compare, ensure_calibrated, measured_trace
from lab.outputs import check_report_folder, remove_partial, replace_report, write_manifest
from lab.plots import plot_compare, plot_timelines
from lab.predict import local_cluster
from lab.records import median_abs_error, records_as_dicts, write_csv, write_json
from lab.twins import all_twins
from lab.units import format_size
from simulator.core.calibration import check_writable, find_entry


def build_report(out: Path, quick: bool = False, calibration: str | Path | None = None,
                 log: Callable[[str], None] = print, repeats: int | None = None) -> Path:
    """Write the report into ``out`` and return its ``index.md`` (``out`` as
    :func:`lab.outputs.replace_report` leaves it).

    Raises:
        UsageError: ``out`` holds files the lab did not write, or cannot be made (nothing
            measured yet).
        CalibrationError: the calibration file cannot be read or saved (nothing measured yet).
    """
    started = time.monotonic()
    out = Path(out)
    check_report_folder(out)
    check_writable(calibration)
    twins = [t for t in all_twins() if t.tour]
    sweeps = {t.name: (t.quick_worlds[:1] if quick else t.quick_worlds,
                       t.quick_sizes[:2] if quick else t.quick_sizes) for t in twins}
    worlds = sorted({w for tworlds, _ in sweeps.values() for w in tworlds})
    ensure_calibrated(worlds, calibration=calibration, quick=quick, log=log)
    repeats = repeats or (5 if quick else 20)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=out.parent))
    try:
        lines = ["# distml-lab report", "",
                 "Prediction (simulated twin on this machine's calibration) beside measurement "
                 "(real twin on real processes). Times in µs; error = (predicted − measured) / "
                 "measured.", "", "## Calibration", "",
                 "| entry | α (µs) | B (GB/s) | bus (GB/s) | busy α (µs) | reduce (GB/s) "
                 "| copy (GB/s) | matmul (GFLOP/s) |",
                 "|---|---|---|---|---|---|---|---|"]
        for world in worlds:
            e = find_entry(max(world, 2), path=calibration)
            lines.append(f"| {e.key} | {e.latency_s * 1e6:.1f} | {e.bandwidth_Bps / 1e9:.2f} "
                         f"| {e.bus_bandwidth_Bps / 1e9:.2f} | {e.bus_latency_s * 1e6:.1f} "
                         f"| {e.reduce_Bps / 1e9:.2f} | {e.memcpy_Bps / 1e9:.2f} "
                         f"| {e.flops_per_s / 1e9:.1f} |")
        for twin in twins:
            tworlds, sizes = sweeps[twin.name]
            log(f"{twin.name}: comparing at worlds {list(tworlds)}, "
                f"sizes {[format_size(s) for s in sizes]} ...")
            records = compare(twin, tworlds, sizes, repeats, calibration)
            rows = records_as_dicts(records)
            write_csv(rows, tmp / f"{twin.name}.csv")
            write_json({"records": rows}, tmp / f"{twin.name}.json")
            plot_compare(records, tmp / f"{twin.name}.png")
            world, nbytes = tworlds[-1], sizes[-1]
            predicted = twin.simulate(local_cluster(world, calibration=calibration),
                                      nbytes).trace
            measured = measured_trace(twin, world, nbytes)
            predicted.write_chrome(tmp / f"{twin.name}.predicted.trace.json", "predicted")
            measured.write_chrome(tmp / f"{twin.name}.measured.trace.json", "measured")
            plot_timelines(predicted, measured, tmp / f"{twin.name}.timeline.png",
                           f"{twin.name}, p={world}, {format_size(nbytes)}")
            lines += ["", f"## {twin.name} (chapter {twin.chapter})", "", twin.summary, "",
                      f"Median |error|: {median_abs_error(records):.1%}", "",
                      "| p | size | predicted | measured median | p10 | p90 | error |",
                      "|---|---|---|---|---|---|---|"]
            for r in records:
                lines.append(f"| {r.world} | {format_size(r.bytes)} | {r.predicted_s * 1e6:.1f} "
                             f"| {r.measured_median_s * 1e6:.1f} | {r.measured_p10_s * 1e6:.1f}"
                             f" | {r.measured_p90_s * 1e6:.1f} | {r.rel_error:+.1%} |")
            lines += ["", f"![{twin.name}]({twin.name}.png)", "",
                      f"![{twin.name} timelines]({twin.name}.timeline.png)", "",
                      f"Chrome traces: `{twin.name}.predicted.trace.json`, "
                      f"`{twin.name}.measured.trace.json`."]
        lines += ["", f"_Generated in {time.monotonic() - started:.0f} s._", ""]
        (tmp / "index.md").write_text("\n".join(lines))
        write_manifest(tmp)
        out = replace_report(tmp, out)
    finally:
        if tmp.exists():
            remove_partial(tmp)
    return out / "index.md"
