"""Horovod step time over the fusion threshold, predicted vs measured (book ch. 7).

    .venv/bin/python benchmarks/horovod_accuracy.py [--worlds 2,4]
        [--quick | --points 0,1,4,16,64] [--repeats 20] [--model textbook|host|both] [--runs 3]
        [--out benchmarks/results]

The registry's ``horovod`` twin (:mod:`lab.strategies_horovod`) through the shared runner
(``_accuracy.py``): each run calibrates this machine afresh (primitives only), then compares a
training step of ``backends.horovod`` at every fusion threshold (MB, at the twin's cycle time)
with :mod:`simulator.horovod`'s prediction, as ``distml-lab compare horovod`` does. Each point
also prints the engine's cycles and all-reduces per step, predicted and measured.

Writes ``horovod_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the median
|relative error| per world and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main


def extras(row: dict[str, Any]) -> str:
    """Cycles and all-reduces per step, predicted and measured."""
    return (f"cycles {row['measured_cycles']:.1f} (predicted {row['predicted_cycles']:.1f}), "
            f"all-reduces {row['measured_all_reduces']:.1f} (predicted "
            f"{row['predicted_all_reduces']:.1f})")


if __name__ == "__main__":
    main(__doc__, "horovod_accuracy", ["horovod"], extras)
