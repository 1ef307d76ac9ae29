"""Pipeline step time over the micro-batches, predicted vs measured: GPipe, 1F1B and
interleaved 1F1B (book ch. 8–9).

    .venv/bin/python benchmarks/pipeline_accuracy.py [--twins pipeline.gpipe,…]
        [--worlds 2,4] [--quick | --points 1,2,4,8,16] [--repeats 20]
        [--model textbook|host|both] [--runs 3] [--out benchmarks/results]

The registry's ``pipeline.gpipe``, ``pipeline.1f1b`` and ``pipeline.interleaved`` twins
(:mod:`lab.strategies_pipeline`; a world is a number of stages) through the shared runner
(``_accuracy.py``): each run calibrates this machine afresh (primitives only), then compares
our pipeline runtime's step at every number of micro-batches with
:func:`simulator.pipeline.simulate.simulate_pipeline`'s prediction, as
``distml-lab compare pipeline.gpipe`` does. Each point also prints the predicted bubble, the
largest stage's peak activation memory, measured and predicted, and the share of the host's CPU
that other programs used while it was measured (the noise to read beside the error).

Writes ``pipeline_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the median
|relative error| per schedule, number of stages and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main

TWINS = ["pipeline.gpipe", "pipeline.1f1b", "pipeline.interleaved"]


def _largest(value: Any) -> float:
    """A per-stage list's largest value (MiB), or a single value's."""
    return (max(value) if isinstance(value, list) else value) / 2**20


def extras(row: dict[str, Any]) -> str:
    """Bubble, peak activation memory (measured, predicted), foreign CPU share."""
    return (f"bubble {row['predicted_bubble']:.0%}, peak activations "
            f"{_largest(row['measured_peak_activation_bytes']):.1f} MiB (predicted "
            f"{_largest(row['predicted_peak_activation_bytes']):.1f}), foreign CPU "
            f"{row['foreign_cpu_share']:.0%}")


if __name__ == "__main__":
    main(__doc__, "pipeline_accuracy", TWINS, extras)
