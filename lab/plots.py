"""Plots: prediction beside measurement, and predicted beside measured timelines.

Matplotlib only (with no display it draws off-screen, so CI and SSH work); each function
writes a PNG when given a path and returns the figure for notebooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from lab.units import format_size
from simulator.core.engine import Trace

KIND_COLOURS = {"send": "tab:blue", "recv": "tab:orange", "compute": "tab:green",
                "reduce": "tab:red", "memcpy": "tab:purple", "wait": "tab:gray",
                "step": "tab:olive"}
"""The span kinds every chapter shares (the simulator's :class:`~simulator.core.SimComm`)."""

OTHER_COLOURS = ("tab:cyan", "tab:brown", "tab:pink", "gold", "navy", "teal", "salmon",
                 "darkkhaki", "orchid", "slategray")
"""Colours of a chapter's own kinds (a parameter server's ``pull``/``push``, DDP's ``ready``,
Horovod's ``NEGOTIATE`` …), handed out in sorted order of kind."""


def kind_colours(kinds: Sequence[str] | set[str]) -> dict[str, str]:
    """A colour for each of ``kinds``: :data:`KIND_COLOURS`' for the shared ones, then
    :data:`OTHER_COLOURS` in turn (sorted by kind, so the same kinds get the same colours)."""
    others = sorted(k for k in kinds if k not in KIND_COLOURS)
    return {**{k: c for k, c in KIND_COLOURS.items() if k in kinds},
            **{k: OTHER_COLOURS[i % len(OTHER_COLOURS)] for i, k in enumerate(others)}}


def _save(fig: Figure, path: str | Path | None) -> Figure:
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".tmp" + path.suffix)
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        tmp.replace(path)
    return fig


def plot_compare(records: Sequence[Any], path: str | Path | None = None,
                 title: str | None = None) -> Figure:
    """Time vs message size, log-log: predicted line, measured median with its p10–p90 band.

    ``records`` are :class:`lab.records.Record` (or dicts with the same fields).
    """
    rows = [r if isinstance(r, dict) else r.__dict__ for r in records]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, world in enumerate(sorted({r["world"] for r in rows})):
        pts = sorted((r for r in rows if r["world"] == world), key=lambda r: r["bytes"])
        x = [r["bytes"] for r in pts]
        colour = f"C{i}"
        ax.plot(x, [r["predicted_s"] for r in pts], "-", color=colour,
                label=f"predicted, p={world}")
        ax.plot(x, [r["measured_median_s"] for r in pts], "o", color=colour,
                label=f"measured median, p={world}")
        ax.fill_between(x, [r["measured_p10_s"] for r in pts],
                        [r["measured_p90_s"] for r in pts], color=colour, alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted({r["bytes"] for r in rows})
    ax.set_xticks(ticks[:: max(1, len(ticks) // 6)])
    ax.set_xticklabels([format_size(t) for t in ticks[:: max(1, len(ticks) // 6)]])
    ax.set_xlabel("message size")
    ax.set_ylabel("time (s)")
    ax.set_title(title or f"{rows[0]['twin']}: predicted vs measured (band: p10–p90)"
                 if rows else "no data")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def time_unit(seconds: float) -> tuple[str, float]:
    """A unit that makes ``seconds`` read as a small number: (name, scale)."""
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return name, scale
    return "ns", 1e-9


def _draw_timeline(ax: Any, trace: Trace, title: str, unit: tuple[str, float],
                   colours: dict[str, str]) -> None:
    name, scale = unit
    ranks = sorted({s.rank for s in trace})
    for s in sorted(trace, key=lambda s: -s.duration):  # a span inside another drawn on top
        ax.barh(s.rank, max(s.duration, 1e-12) / scale, left=s.start / scale, height=0.6,
                color=colours[s.kind], edgecolor="black", linewidth=0.3)
    ax.set_yticks(ranks)
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_title(title)
    ax.set_xlabel(f"time ({name})")


def plot_timelines(predicted: Trace, measured: Trace | None = None,
                   path: str | Path | None = None, title: str = "") -> Figure:
    """Predicted (and measured) timelines, one row per rank, one bar per span.

    Both traces share one time axis, so a longer measured bar is visibly longer.
    """
    panels = 2 if measured is not None else 1
    fig, axes = plt.subplots(panels, 1, figsize=(7.5, 1.2 + 1.6 * panels), sharex=True,
                             squeeze=False)
    traces = [predicted.shifted()] + ([measured.shifted()] if measured is not None else [])
    unit = time_unit(max((s.end for t in traces for s in t), default=0.0))
    colours = kind_colours({s.kind for t in traces for s in t})
    _draw_timeline(axes[0][0], traces[0], f"predicted {title}".strip(), unit, colours)
    if measured is not None:
        _draw_timeline(axes[1][0], traces[1], f"measured {title}".strip(), unit, colours)
    if colours:
        fig.legend([Rectangle((0, 0), 1, 1, color=c) for c in colours.values()],
                   list(colours), loc="upper right", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_strategy(rows: Sequence[dict[str, Any]], parameter: str,
                  path: str | Path | None = None, title: str | None = None) -> Figure:
    """A strategy twin's step time over the values of its ``parameter`` (one panel, a line
    per world size): each tier's prediction as a line, the measured median as points with
    their p10–p90 bars. ``rows`` are :func:`lab.strategies.run_comparison`'s."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    values = list(dict.fromkeys(str(r["point"][parameter]) for r in rows))
    styles = {"textbook": ":", "host": "-"}
    markers = {"textbook": "s", "host": "x"}
    for i, world in enumerate(sorted({r["world"] for r in rows})):
        pts = [r for r in rows if r["world"] == world]
        x = [values.index(str(r["point"][parameter])) for r in pts]
        colour = f"C{i}"
        tiers = [m for m in styles if f"predicted_{m}_s" in pts[0]]
        for m in tiers or [pts[0].get("model", "host")]:
            key = f"predicted_{m}_s" if tiers else "predicted_s"
            ax.plot(x, [r[key] * 1e3 for r in pts], styles.get(m, "-"), color=colour,
                    marker=markers.get(m, "x"), fillstyle="none",
                    label=f"predicted ({m}), p={world}")
        median = [r["measured_median_s"] * 1e3 for r in pts]
        below = [r["measured_median_s"] * 1e3 - r["measured_p10_s"] * 1e3 for r in pts]
        above = [r["measured_p90_s"] * 1e3 - r["measured_median_s"] * 1e3 for r in pts]
        ax.errorbar(x, median, yerr=[below, above], fmt="o", color=colour, capsize=3,
                    label=f"measured median, p={world}")
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(values)
    ax.set_xlabel(parameter)
    ax.set_ylabel("time per step (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or (f"{rows[0]['twin']}: predicted vs measured (bars: p10–p90)"
                           if rows else "no data"))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
