"""Chapter 1's point-to-point twins, predicted vs measured over message sizes (book ch. 1–2).

    .venv/bin/python benchmarks/p2p_accuracy.py [--twins ping_pong,stream,one_to_all]
        [--worlds 2,3,4] [--quick | --points 64KiB:64MiB] [--repeats 20]
        [--model textbook|host|both] [--runs 3] [--out benchmarks/results]

The registry's point-to-point twins (:mod:`lab.twins_p2p`: the ping-pong, the stream one way,
the naive one-to-all) through the shared runner (``_accuracy.py``): each run calibrates this
machine afresh (primitives only), then compares each with its simulated twin by
:func:`lab.compare.compare`, as ``distml-lab compare ping_pong`` does. Each point also prints
the α-β model's closed form with the calibrated α and β, where the twin has one.

Writes ``p2p_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the median
|relative error| per twin, world and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import collective_twins, main

TWINS = collective_twins("1-2")


def extras(row: dict[str, Any]) -> str:
    """The closed form (α + n·β and kin), where the twin has one."""
    closed = row["closed_form_s"]
    return "" if closed is None else f"closed form {closed * 1e3:.3f} ms"


if __name__ == "__main__":
    main(__doc__, "p2p_accuracy", TWINS, extras)
