"""RPC model parallelism: a split model's training step over the batch, predicted vs measured
(book ch. 13).

    .venv/bin/python benchmarks/rpc_accuracy.py [--worlds 2,3,4] [--quick | --points 32,128,512]
        [--repeats 20] [--model textbook|host|both] [--runs 3] [--out benchmarks/results]

The registry's ``rpc.split`` twin (:mod:`lab.strategies_rpc`; ``world − 1`` stages and a
driver) through the shared runner (``_accuracy.py``), as ``distml-lab compare rpc.split``
compares it: the prediction calibrates the RPC transport itself (an echo sweep → α and
bandwidth, printed with each point), profiles each stage on one process and simulates the step
(forward RPCs, distributed autograd, the distributed optimizer); the real
``backends.rpc.train_split`` is timed. It reads no calibration file, so a run calibrates
nothing else.

Writes ``rpc_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the median
|relative error| per world and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main


def extras(row: dict[str, Any]) -> str:
    """The RPC transport's calibrated α and bandwidth."""
    stages = row["stages"]
    return (f"{stages} stage{'s' if stages != 1 else ''}, RPC α {row['rpc_alpha_s'] * 1e6:.0f} µs, "
            f"B {row['rpc_bandwidth_Bps'] / 1e9:.2f} GB/s")


if __name__ == "__main__":
    main(__doc__, "rpc_accuracy", ["rpc.split"], extras)
