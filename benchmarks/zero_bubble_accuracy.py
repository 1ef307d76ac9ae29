"""Zero-bubble pipelines: step time, bubble and peak activation memory, predicted vs measured
(book ch. 23).

    .venv/bin/python benchmarks/zero_bubble_accuracy.py
        [--twins pipeline.zb_h1,pipeline.zbv,pipeline.dualpipev] [--worlds 2,4]
        [--quick | --points 8,16] [--repeats 20] [--model textbook|host|both]
        [--runs 3] [--out benchmarks/results]

The registry's ``pipeline.zb_h1``, ``pipeline.zbv`` and ``pipeline.dualpipev`` twins
(:mod:`lab.strategies_zero_bubble`; a point is the number of micro-batches) through the shared
runner (``_accuracy.py``): each run calibrates this machine afresh, then compares
:class:`backends.pipeline.zero_bubble.ZeroBubblePipeline`'s step with
:func:`simulator.pipeline.zero_bubble.simulate_zero_bubble`'s prediction from the one-process
stage profile, as ``distml-lab compare pipeline.zb_h1`` does. Each point also prints the
bubble (measured on one traced step, and predicted), the largest peak activation bytes of a
rank (measured and predicted), and PyTorch's schedule's median step on the same split where
PyTorch defines it.

Writes ``zero_bubble_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the
median |relative error| per twin, world and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main

TWINS = ["pipeline.zb_h1", "pipeline.zbv", "pipeline.dualpipev"]


def extras(row: dict[str, Any]) -> str:
    """Bubble, peak activation memory (measured, predicted) and PyTorch's step."""
    builtin = row.get("builtin_median_s")
    theirs = f", PyTorch {builtin * 1e3:.1f} ms" if builtin else ""
    return (f"bubble {row.get('measured_bubble', float('nan')):.2f} (predicted "
            f"{row.get('predicted_bubble', float('nan')):.2f}), peak activations "
            f"{row['measured_peak_bytes'] / 2**20:.2f} MiB (predicted "
            f"{row['predicted_peak_bytes'] / 2**20:.2f}){theirs}")


if __name__ == "__main__":
    main(__doc__, "zero_bubble_accuracy", TWINS, extras)
