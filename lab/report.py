"""``distml-lab report``: the whole book, predicted beside measured (``make demo``).

1. Calibrate this machine if it has no calibration yet for the world sizes needed.
2. For every chapter chosen (``--chapters``, default all): each of its twins' sweeps, predicted
   in the model tiers asked for (``--model``, default both: the textbook's α-β-γ model and the
   host model on top of it) and measured — the collectives over message sizes, the strategies
   over the parameter their chapter teaches (:mod:`lab.strategies`) — written as CSV and JSON,
   with a plot; and one point's predicted and measured timelines as a PNG and as Chrome
   traces (open them in https://ui.perfetto.dev): a collective's at its largest world and
   size, a strategy twin's (:attr:`lab.strategies.StrategyTwin.timeline`) one step at the
   first point of its sweep at its smallest world, in the shown tier.
3. ``index.md``: the calibration, a summary of the median |error| of each tier per chapter,
   then one section per chapter with a table per twin (:mod:`lab.report_sections`).

Everything goes to a hidden folder beside ``out`` first and moves into place only when complete,
so an interrupted report never leaves a half-written one. ``out`` may be new, empty or a report
the lab wrote before (which is replaced); anything else is refused before any work starts
(:mod:`lab.outputs`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.compare import compare, ensure_calibrated, measured_trace
from lab.outputs import check_report_folder, remove_partial, replace_report, write_manifest
from lab.plots import plot_compare, plot_strategy, plot_timelines
from lab.predict import local_cluster
from lab.records import records_as_dicts, write_csv, write_json
from lab.report_sections import Section, calibration_table, summary_table, twin_section
from lab.strategies import StrategyTwin, all_strategies, first_chapter, run_comparison
from lab.strategy_cli import flat_row, in_chapter
from lab.twins import Twin, all_twins
from lab.units import UsageError, format_size
from simulator.core.calibration import Calibration, check_writable
from simulator.core.engine import Trace
from simulator.host.factory import Model, shown_tier

CHAPTERS = tuple(range(1, 24))
"""The book's chapters the lab has twins for."""


@dataclass(frozen=True)
class Plan:
    """What a report runs: each twin with its worlds and its sizes or points."""

    collectives: list[tuple[Twin, tuple[int, ...], tuple[int, ...]]]
    strategies: list[tuple[StrategyTwin, tuple[int, ...], tuple[Any, ...]]]

    def calibrated_worlds(self) -> list[int]:
        """The world sizes whose calibration the predictions read."""
        worlds = {max(w, 2) for _, ws, _ in self.collectives for w in ws}
        worlds |= {t.processes(w, p) for t, ws, ps in self.strategies if t.calibrated
                   for w in ws for p in ps}
        return sorted(worlds)


def parse_chapters(text: str | None) -> list[int]:
    """``"1,2,5"`` → ``[1, 2, 5]`` (``None``: every chapter); one line for anything else."""
    if text is None:
        return list(CHAPTERS)
    chapters = []
    for part in text.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit()) or int(part) not in CHAPTERS:
            raise UsageError(f"invalid --chapters {text!r}: chapter numbers from "
                             f"{CHAPTERS[0]} to {CHAPTERS[-1]}, like 1,2,5")
        chapters.append(int(part))
    return sorted(set(chapters))


def plan(chapters: Sequence[int], quick: bool) -> Plan:
    """The twins of ``chapters`` and their sweeps: a collective's tour sizes, a strategy's
    quick points at its first quick world (``quick``: a collective's first two sizes too)."""
    def wanted(chapter: str) -> bool:
        return any(in_chapter(chapter, str(c)) for c in chapters)

    collectives = [(t, t.quick_worlds[:1] if quick else t.quick_worlds,
                    t.quick_sizes[:2] if quick else t.quick_sizes)
                   for t in all_twins() if t.tour and wanted(t.chapter)]
    strategies = [(t, t.quick_worlds[:1], t.quick_points)
                  for t in all_strategies() if wanted(t.chapter)]
    return Plan(collectives, strategies)


def build_report(out: Path, quick: bool = False, calibration: str | Path | None = None,
                 log: Callable[[str], None] = print, repeats: int | None = None,
                 chapters: Sequence[int] | None = None,
                 models: Sequence[Model] = ("textbook", "host")) -> Path:
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
    work = plan(chapters or CHAPTERS, quick)
    ensure_calibrated(work.calibrated_worlds(), calibration=calibration, quick=quick, log=log)
    cal = Calibration.load(calibration)  # resolved once: every prediction reads these entries
    repeats = repeats or (5 if quick else 20)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=out.parent))
    try:
        sections: list[Section] = []
        for twin, worlds, sizes in work.collectives:
            sections.append(_collective(twin, worlds, sizes, repeats, cal, models, tmp, log))
        drawn: dict[str, str] = {}  # chapter → the twin whose timelines a quick report drew
        for strategy, worlds, points in work.strategies:
            log(f"{strategy.name}: comparing at worlds {list(worlds)}, "
                f"{strategy.parameter} {list(points)} ...")
            rows = run_comparison(strategy, worlds, points, max(3, repeats // 2), cal, models)
            write_csv([flat_row(r) for r in rows], tmp / f"{strategy.name}.csv")
            write_json({"records": rows}, tmp / f"{strategy.name}.json")
            close(plot_strategy(rows, strategy.parameter, tmp / f"{strategy.name}.png"))
            timelines: dict[str, Any]
            if quick and strategy.chapter in drawn:
                timelines = {"timeline_note": "A quick report draws one twin's timelines per "
                                              f"chapter: see {drawn[strategy.chapter]}'s."}
            else:
                timelines = strategy_timeline(strategy, worlds, points, cal, models, tmp, log)
                drawn.setdefault(strategy.chapter, strategy.name)
            sections.append(Section(strategy.name, strategy.chapter, strategy.summary, rows,
                                    strategy.parameter, **timelines))
        lines = ["# distml-lab report", "",
                 "Prediction (simulated twin on this machine's calibration) beside measurement "
                 "(real twin on real processes). Error = (predicted − measured) / measured. "
                 "The *textbook* tier is the α-β-γ model with contention; the *host* tier adds "
                 "the host effects this machine's calibration measured.", ""]
        lines += calibration_table(cal, work.calibrated_worlds())
        lines += summary_table(sections, models)
        for section in sorted(sections, key=lambda s: first_chapter(s.chapter)):
            lines += twin_section(section, models)
        lines += ["", f"_Generated in {time.monotonic() - started:.0f} s._", ""]
        (tmp / "index.md").write_text("\n".join(lines))
        write_manifest(tmp)
        out = replace_report(tmp, out)
    finally:
        if tmp.exists():
            remove_partial(tmp)
    return out / "index.md"


def close(figure: Any) -> None:
    """Let go of a figure once saved (pyplot keeps every open figure alive)."""
    import matplotlib.pyplot as plt

    plt.close(figure)


def _collective(twin: Twin, worlds: Sequence[int], sizes: Sequence[int], repeats: int,
                cal: Calibration, models: Sequence[Model], tmp: Path,
                log: Callable[[str], None]) -> Section:
    """A collective's sweep, its files, and one point's timelines (the host tier's, or the
    only tier asked for)."""
    log(f"{twin.name}: comparing at worlds {list(worlds)}, "
        f"sizes {[format_size(s) for s in sizes]} ...")
    records = compare(twin, worlds, sizes, repeats, cal, models=models)
    rows = records_as_dicts(records)
    write_csv(rows, tmp / f"{twin.name}.csv")
    write_json({"records": rows}, tmp / f"{twin.name}.json")
    close(plot_compare(records, tmp / f"{twin.name}.png"))
    world, nbytes = worlds[-1], sizes[-1]
    model = shown_tier(models)
    predicted = twin.simulate(local_cluster(world, calibration=cal, model=model), nbytes).trace
    write_timelines(twin.name, predicted, measured_trace(twin, world, nbytes), tmp,
                    f"{twin.name}, p={world}, {format_size(nbytes)}")
    return Section(twin.name, twin.chapter, twin.summary, rows, None, timeline=True)


def write_timelines(name: str, predicted: Trace, measured: Trace | None, tmp: Path,
                    title: str) -> None:
    """``NAME.timeline.png`` and the Chrome traces ``NAME.predicted.trace.json`` (and
    ``NAME.measured.trace.json`` where there is a measured trace) in ``tmp``."""
    predicted.write_chrome(tmp / f"{name}.predicted.trace.json", "predicted")
    if measured is not None:
        measured.write_chrome(tmp / f"{name}.measured.trace.json", "measured")
    close(plot_timelines(predicted, measured, tmp / f"{name}.timeline.png", title))


def strategy_timeline(twin: StrategyTwin, worlds: Sequence[int], points: Sequence[Any],
                       cal: Calibration, models: Sequence[Model], tmp: Path,
                       log: Callable[[str], None]) -> dict[str, Any]:
    """One step's timelines of a strategy twin (:attr:`StrategyTwin.timeline`) at the first
    point of its sweep at the smallest world, in the shown tier; the :class:`Section` fields
    that say what was drawn. A failure is logged and said in the section, never raised: the
    rest of the report stands."""
    if twin.timeline is None:
        return {}
    world = min(worlds)
    model = shown_tier(models)
    try:
        point = twin.points_at(world, points)[0]
        log(f"{twin.name}: one step's timelines at world {world}, {twin.parameter} {point} ...")
        predicted, measured = twin.timeline(world, point, cal, model)
        write_timelines(twin.name, predicted, measured, tmp,
                        f"{twin.name}, p={world}, {twin.parameter}={point} ({model} tier)")
    except Exception as error:  # any failure: said in the section, the report stands
        message = f"{type(error).__name__}: {error}".splitlines()[0]
        log(f"{twin.name}: no timeline ({message})")
        return {"timeline_note": f"The timelines could not be drawn ({message})."}
    return {"timeline": True, "measured_timeline": measured is not None}
