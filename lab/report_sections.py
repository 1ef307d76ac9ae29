"""The report's Markdown: the calibration, a summary per chapter, a section per twin.

A :class:`Section` is one twin's rows (dicts with the comparison fields of
:class:`lab.records.Record`, and ``point`` for a strategy twin); the functions here turn
sections into lines of ``index.md`` (:mod:`lab.report`). Times are printed in ms for strategies
(a training step) and µs for collectives (one call).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lab.records import median_abs_error
from lab.strategies import first_chapter
from lab.units import format_size
from simulator.core.calibration import Calibration, CalibrationError


@dataclass(frozen=True)
class Section:
    """One twin's comparison in the report."""

    name: str
    chapter: str
    summary: str
    rows: list[dict[str, Any]]
    parameter: str | None = None
    """The strategy twin's swept parameter (``None``: a collective, swept over sizes)."""
    timeline: bool = False
    """Whether timelines were written (``NAME.timeline.png``, ``NAME.predicted.trace.json``)."""
    measured_timeline: bool = True
    """With :attr:`timeline`, whether a measured one was too (``NAME.measured.trace.json``)."""
    timeline_note: str = ""
    """What the section says of its timelines instead (why they could not be drawn)."""


def calibration_table(cal: Calibration, worlds: Sequence[int]) -> list[str]:
    """The calibrated primitives the predictions read, one row per world size."""
    lines = ["## Calibration", "",
             "| entry | α (µs) | B (GB/s) | bus (GB/s) | busy α (µs) | reduce (GB/s) "
             "| copy (GB/s) | matmul (GFLOP/s) |", "|---|---|---|---|---|---|---|---|"]
    for world in worlds:
        try:
            e = cal.entry(world)
        except CalibrationError:
            continue
        lines.append(f"| {e.key} | {e.latency_s * 1e6:.1f} | {e.bandwidth_Bps / 1e9:.2f} "
                     f"| {e.bus_bandwidth_Bps / 1e9:.2f} | {e.bus_latency_s * 1e6:.1f} "
                     f"| {e.reduce_Bps / 1e9:.2f} | {e.memcpy_Bps / 1e9:.2f} "
                     f"| {e.flops_per_s / 1e9:.1f} |")
    return [*lines, ""]


def _tiers(models: Sequence[str]) -> list[str]:
    return list(models) if len(models) > 1 else []


def summary_table(sections: Sequence[Section], models: Sequence[str]) -> list[str]:
    """Median |error| per chapter (over all its twins' points), per tier where both ran."""
    chapters: dict[str, list[dict[str, Any]]] = {}
    for s in sorted(sections, key=lambda s: first_chapter(s.chapter)):
        chapters.setdefault(s.chapter, []).extend(s.rows)
    tiers = _tiers(models)
    heads = [f"{m} median abs error" for m in tiers] or ["median abs error"]
    lines = ["## Summary", "", "| chapter | twins | points | " + " | ".join(heads) + " |",
             "|---|---|---|" + "---|" * len(heads)]
    for chapter, rows in chapters.items():
        names = sorted({r["twin"] for r in rows})
        errors = ([median_abs_error(rows, m) for m in tiers] if tiers
                  else [median_abs_error(rows)])
        lines.append(f"| {chapter} | {', '.join(names)} | {len(rows)} | "
                     + " | ".join(f"{e:.1%}" for e in errors) + " |")
    return [*lines, ""]


def twin_section(section: Section, models: Sequence[str]) -> list[str]:
    """A twin's heading, summary, median errors, table, plot and timelines (or why there
    are none)."""
    tiers = _tiers(models)
    lines = ["", f"## {section.name} (chapter {section.chapter})", "", section.summary, ""]
    if tiers:
        lines.append("Median |error|: " + ", ".join(
            f"{m} {median_abs_error(section.rows, m):.1%}" for m in tiers))
    else:
        lines.append(f"Median |error|: {median_abs_error(section.rows):.1%}")
    strategy = section.parameter is not None
    unit, scale = ("ms", 1e3) if strategy else ("µs", 1e6)
    first = section.parameter if strategy else "size"
    predicted = [f"{m} ({unit})" for m in tiers] or [f"predicted ({unit})"]
    errors = [f"{m} error" for m in tiers] or ["error"]
    head = ["p", str(first), *predicted, f"measured median ({unit})", "p10", "p90", *errors]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in section.rows:
        where = (r["point"][section.parameter] if strategy
                 else format_size(r["bytes"]))
        if tiers:
            times = [r[f"predicted_{m}_s"] for m in tiers]
            errs = [r[f"rel_error_{m}"] for m in tiers]
        else:
            times, errs = [r["predicted_s"]], [r["rel_error"]]
        cells = [str(r["world"]), str(where), *(f"{t * scale:.1f}" for t in times),
                 f"{r['measured_median_s'] * scale:.1f}", f"{r['measured_p10_s'] * scale:.1f}",
                 f"{r['measured_p90_s'] * scale:.1f}", *(f"{e:+.1%}" for e in errs)]
        lines.append("| " + " | ".join(cells) + " |")
    for kind, label in (("peak", "Peak memory"), ("model_state", "Model states a rank holds")):
        memory = [r for r in section.rows if r.get(f"measured_{kind}_bytes")
                  and f"predicted_{kind}_bytes" in r]
        if memory:
            ratio = statistics.median(r[f"predicted_{kind}_bytes"] / r[f"measured_{kind}_bytes"]
                                      for r in memory)
            lines += ["", f"{label}, predicted / measured (median over points): {ratio:.3f}"]
    lines += ["", f"![{section.name}]({section.name}.png)"]
    if section.timeline:
        traces = [f"[predicted]({section.name}.predicted.trace.json)"]
        if section.measured_timeline:
            traces.append(f"[measured]({section.name}.measured.trace.json)")
        else:
            traces.append("no measured trace: the real twin records no spans")
        lines += ["", f"![{section.name} timelines]({section.name}.timeline.png)", "",
                  "Chrome traces (open in https://ui.perfetto.dev): " + ", ".join(traces) + "."]
    if section.timeline_note:
        lines += ["", section.timeline_note]
    return lines
