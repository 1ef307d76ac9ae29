"""Pictures for notebook 07: a Horovod step drawn with a lane per thread.

Chapter 7. :func:`plot_cycles` draws predicted (:func:`lab.horovod_predict.predict`) and
measured (:func:`lab.horovod_measure.timeline`) steps side by side, the main thread and the
background thread of every rank, so the cycle and the fusion can be read off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simulator.core.engine import Trace

LANES = {"compute": 0, "wait": 0, "ENQUEUE": 0, "WAIT": 1, "NEGOTIATE": 1,
         "MEMCPY_IN_FUSION_BUFFER": 1, "ALLREDUCE": 1, "MEMCPY_OUT_FUSION_BUFFER": 1}
"""Which lane of a rank each span kind is drawn in: 0 the main thread, 1 the background."""
COLOURS = {"compute": "tab:green", "wait": "tab:gray", "WAIT": "whitesmoke",
           "NEGOTIATE": "tab:orange", "MEMCPY_IN_FUSION_BUFFER": "tab:purple",
           "ALLREDUCE": "tab:red", "MEMCPY_OUT_FUSION_BUFFER": "tab:purple"}


def plot_cycles(traces: Sequence[tuple[str, Trace]], path: str | None = None) -> Any:
    """One step per panel (e.g. predicted and measured), two lanes per rank: the main thread
    (forward, backward, synchronize, optimizer; a tick per gradient enqueued) and the
    background thread (sleep, negotiate, copy in, all-reduce, copy out), so the cycle and the
    fusion can be read off."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(len(traces), 1, figsize=(10, 1.0 + 1.2 * 2 * len(traces)),
                             squeeze=False)
    end = max((s.end - min(x.start for x in t) for _, t in traces for s in t), default=0.0)
    for ax, (title, raw) in zip(axes[:, 0], traces, strict=True):
        trace = raw.shifted()
        ranks = sorted({s.rank for s in trace})
        for row, rank in enumerate(ranks):
            for s in trace.for_rank(rank):
                if s.kind not in LANES:
                    continue
                lane = 2 * row + LANES[s.kind]
                if s.kind == "ENQUEUE":  # an instant: a gradient handed to the thread
                    ax.plot([s.start * 1e3] * 2, [lane + 0.35, lane - 0.35], color="black",
                            lw=1)
                    continue
                ax.barh(lane, max(s.duration, 1e-9) * 1e3, left=s.start * 1e3, height=0.6,
                        color=COLOURS[s.kind], edgecolor="black", linewidth=0.3)
        ax.set_yticks(range(2 * len(ranks)))
        ax.set_yticklabels([f"rank {r} {lane}" for r in ranks for lane in ("main", "bg")])
        ax.invert_yaxis()
        ax.set_title(title)
        ax.set_xlabel("time (ms)")
        ax.set_xlim(0, end * 1e3 * 1.02)
    handles = [Patch(color=c, label=k) for k, c in COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    if path:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig
