"""ZeRO stages 1–3: step time and model states over the model's size, predicted vs measured
(book ch. 14).

    .venv/bin/python benchmarks/zero_accuracy.py [--twins zero.1,zero.2,zero.3] [--worlds 2,4]
        [--quick | --points 512,1024,2048] [--repeats 20] [--model textbook|host|both]
        [--runs 3] [--out benchmarks/results]

The registry's ``zero.1``, ``zero.2`` and ``zero.3`` twins (:mod:`lab.strategies_zero`; a point
is the MLP's hidden width) through the shared runner (``_accuracy.py``): each run calibrates
this machine afresh (primitives only), then compares :class:`backends.zero.Zero`'s training
step with :func:`simulator.zero.simulate_zero_step`'s prediction from one-process profiles, as
``distml-lab compare zero.1`` does. Each point also prints the model states a rank holds,
counted on the real twin and predicted.

Writes ``zero_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the median
|relative error| per stage, world and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main

TWINS = ["zero.1", "zero.2", "zero.3"]


def extras(row: dict[str, Any]) -> str:
    """A rank's model states (parameters, gradients, optimizer), measured and predicted."""
    return (f"model states {row['measured_model_state_bytes'] / 2**20:.2f} MiB (predicted "
            f"{row['predicted_model_state_bytes'] / 2**20:.2f})")


if __name__ == "__main__":
    main(__doc__, "zero_accuracy", TWINS, extras)
