"""DDP step time over the bucket size, predicted vs measured, and ours against PyTorch's (ch. 5–6).

    .venv/bin/python benchmarks/ddp_accuracy.py [--worlds 2,4] [--quick | --points 1,4,16,64]
        [--repeats 20] [--model textbook|host|both] [--runs 3] [--out benchmarks/results]

The registry's ``ddp`` twin (:mod:`lab.strategies_ddp`) through the shared runner
(``_accuracy.py``): each run calibrates this machine afresh (primitives only), then compares a
training step of our ``backends.ddp`` at every bucket cap with its simulated twin, as
``distml-lab compare ddp`` does. Each point also prints what the twin measured beside it in the
same launch: PyTorch's ``DistributedDataParallel`` (ours / PyTorch: below 1 means ours is
faster) and ours without overlap.

Writes ``ddp_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the median
|relative error| per world and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main


def extras(row: dict[str, Any]) -> str:
    """PyTorch's DDP and ours without overlap, measured in the same launch."""
    ours, pytorch = row["measured_median_s"], row["pytorch_median_s"]
    return (f"PyTorch's DDP {pytorch * 1e3:.3f} ms (ours / PyTorch {ours / pytorch:.2f}), ours "
            f"without overlap {row['ours_no_overlap_median_s'] * 1e3:.3f} ms, "
            f"{row['buckets']} buckets")


if __name__ == "__main__":
    main(__doc__, "ddp_accuracy", ["ddp"], extras)
