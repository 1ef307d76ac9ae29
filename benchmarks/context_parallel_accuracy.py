"""Context parallelism — ring attention and Ulysses: step time over the sequence length,
predicted vs measured (book ch. 21).

    .venv/bin/python benchmarks/context_parallel_accuracy.py [--twins cp.ring,cp.ulysses]
        [--worlds 2,4] [--quick | --points 512,1024,2048] [--repeats 20]
        [--model textbook|host|both] [--runs 3] [--out benchmarks/results]

The registry's ``cp.ring`` and ``cp.ulysses`` twins (:mod:`lab.strategies_context_parallel`;
a point is the sequence length of one causal attention layer, 8 heads of 32 features) through
the shared runner (``_accuracy.py``): each run calibrates this machine afresh (primitives
only), then compares the real step — forward and backward of
:func:`backends.context_parallel.ring_attention` or
:func:`~backends.context_parallel.ulysses_attention` on ``world`` processes — with
:func:`simulator.context_parallel.simulate_context_parallel`'s prediction from a one-process
profile of the rank's compute, as ``distml-lab compare cp.ring`` does. Each point also
prints the bytes a rank sends per step and the attention bytes it is predicted to hold.

Writes ``context_parallel_accuracy-<run id>.json``/``.csv`` (new files every run) and prints
the median |relative error| per twin, world and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main

TWINS = ["cp.ring", "cp.ulysses"]


def extras(row: dict[str, Any]) -> str:
    """Bytes a rank sends per step and its predicted attention bytes."""
    return (f"sends {row['bytes'] / 2**10:.1f} KiB/step, holds "
            f"{row['predicted_activation_bytes'] / 2**20:.2f} MiB (predicted)")


if __name__ == "__main__":
    main(__doc__, "context_parallel_accuracy", TWINS, extras)
