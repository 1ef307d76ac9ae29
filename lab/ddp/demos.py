"""Pictures and demonstrations for notebook 05: a step's lanes, and uneven inputs with Join.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backends import ddp_measure
from lab.ddp.profiling import build_mlp
from simulator.core.engine import Trace

LANE_COLOURS = {"compute": "tab:green", "allreduce": "tab:red", "ready": "black",
                "wait": "tab:gray"}


def plot_step(traces: Sequence[tuple[str, Trace]], path: str | None = None) -> Any:
    """One step per panel, two lanes per rank — compute above, communication below — so the
    overlap of all-reduces with backward is visible; a tick marks each bucket becoming ready."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(traces), 1, figsize=(9, 1.0 + 1.3 * len(traces) * 2),
                             squeeze=False)
    end = max((s.end for _, t in traces for s in t), default=0.0)
    unit, scale = ("ms", 1e-3) if end < 5 else ("s", 1.0)
    for ax, (title, raw) in zip(axes[:, 0], traces, strict=True):
        trace = raw.shifted()
        ranks = sorted({s.rank for s in trace})
        for row, rank in enumerate(ranks):
            for s in trace.for_rank(rank):
                lane = 2 * row + (1 if s.kind == "allreduce" else 0)
                if s.kind == "ready":
                    ax.plot([s.end / scale] * 2, [lane + 0.35, lane - 0.35], color="black",
                            lw=1.5)
                    continue
                ax.barh(lane, max(s.duration, 1e-9) / scale, left=s.start / scale, height=0.6,
                        color=LANE_COLOURS.get(s.kind, "tab:cyan"), edgecolor="black",
                        linewidth=0.3)
                if s.kind == "allreduce":
                    ax.text((s.start + s.duration / 2) / scale, lane,
                            s.name.split()[-1], ha="center", va="center", fontsize=7)
        ax.set_yticks(range(2 * len(ranks)))
        ax.set_yticklabels([f"rank {r} {lane}" for r in ranks for lane in ("compute", "comm")])
        ax.invert_yaxis()
        ax.set_title(title)
        ax.set_xlabel(f"time ({unit})")
        ax.set_xlim(0, end / scale * 1.02)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig


def train_uneven(batches_per_rank: Sequence[int], use_join: bool) -> dict[str, Any]:
    """Rank function: train our DDP of the lab's MLP on ``batches_per_rank[rank]`` batches,
    with or without :class:`backends.ddp_join.Join` (:func:`backends.ddp_measure.train_uneven`);
    returns the steps taken, the time (s) and the parameters' checksum (equal on every rank when
    training ended well)."""
    return ddp_measure.train_uneven(build_mlp, batches_per_rank, use_join)
