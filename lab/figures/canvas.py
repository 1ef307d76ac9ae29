"""What every textbook figure shares: one way to save, one way to draw a schedule.

A figure is a function ``() -> Figure`` (no arguments: everything it shows is fixed in its
code, so two runs draw the same picture). :func:`save` writes it as a small PNG with no
timestamp or software tag in the file, so the bytes depend only on the picture.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.pipeline import Action

DPI = 120
"""Resolution of every PNG, dots per inch: sharp in a browser, a few tens of KiB a file."""

FigureFn = Callable[[], Figure]
"""A figure's drawing function."""

Registry = dict[str, tuple[int, FigureFn]]
"""File name stem (``ch02-ring-chunks``) → (chapter, drawing function)."""

KiB, MiB, GiB = 2**10, 2**20, 2**30

plt.rcParams.update({"svg.hashsalt": "distml-lab", "font.size": 9, "axes.grid": False})


def save(fig: Figure, path: Path) -> Path:
    """Write ``fig`` to ``path`` as PNG (deterministic bytes: no metadata) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path


def draw_schedule(ax: Axes, spans: Sequence[Sequence[tuple[float, float, Action]]],
                  labels: Sequence[Sequence[str]] | None = None, title: str = "") -> None:
    """One row per rank, a box per action: forwards blue, backwards orange, labelled with the
    micro-batch (or ``labels[rank][i]``). ``spans`` as :func:`simulator.pipeline.timeline`
    returns them (start, end, action), in clock ticks or seconds."""
    for rank, row in enumerate(spans):
        for i, (start, end, a) in enumerate(row):
            shade = 0.55 + 0.45 * (a.chunk % 2 == 0)
            colour = (0.12, 0.47, 0.71, shade) if a.kind == "F" else (1.0, 0.5, 0.05, shade)
            ax.barh(rank, end - start, left=start, height=0.8, color=colour,
                    edgecolor="black", linewidth=0.4)
            text = labels[rank][i] if labels is not None else str(a.microbatch)
            ax.text((start + end) / 2, rank, text, ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(spans)), [f"stage {r}" for r in range(len(spans))])
    ax.invert_yaxis()
    ax.set_title(title)


def log2_ticks(ax: Axes, values: Sequence[int]) -> None:
    """Put ``values`` as the x ticks of a base-2 log axis, written as plain integers."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(values), [str(v) for v in values])
    ax.minorticks_off()
