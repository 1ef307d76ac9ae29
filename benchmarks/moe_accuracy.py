"""Expert parallelism: step time over the tokens each rank routes, predicted vs measured
(book ch. 22).

    .venv/bin/python benchmarks/moe_accuracy.py [--worlds 2,4] [--quick | --points 256,1024]
        [--repeats 20] [--model textbook|host|both] [--runs 3] [--out benchmarks/results]

The registry's ``moe`` twin (:mod:`lab.strategies_moe`; a point is the tokens per rank)
through the shared runner (``_accuracy.py``): each run calibrates this machine afresh
(primitives only), then compares :class:`backends.moe.parallel.ExpertParallelMoE`'s training
step with :func:`simulator.moe.simulate_moe_step`'s prediction from the one-process routing
histogram and profile, as ``distml-lab compare moe`` does. Each point also prints the bytes
the busiest rank moves per exchange and the assignments dropped, measured and predicted.

Writes ``moe_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the median
|relative error| per world and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main

TWINS = ["moe"]


def extras(row: dict[str, Any]) -> str:
    """The busiest rank's bytes per exchange and the assignments dropped."""
    return (f"busiest {row['bytes'] / 2**10:.1f} KiB/exchange, dropped "
            f"{row['measured_dropped']} (predicted {row['predicted_dropped']})")


if __name__ == "__main__":
    main(__doc__, "moe_accuracy", TWINS, extras)
