"""Megatron: the small GPT's step on every t × p × d grid, predicted vs measured (book ch. 12).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/tensor_parallel_accuracy.py [--worlds 2,4]
        [--quick | --points t1d2,t2d1,t2d1-sp,…] [--repeats 20] [--model textbook|host|both]
        [--runs 3] [--out benchmarks/results]

The registry's ``megatron`` twin (:mod:`lab.strategies_megatron`; a point is a grid, run at the
world where ``t·p·d`` is that world) through the shared runner (``_accuracy.py``): each run
calibrates this machine afresh (primitives only), then compares
:class:`backends.tensor_parallel.ParallelGPT`'s training step with the prediction from each
grid's compute profile replayed on the calibrated cluster, as ``distml-lab compare megatron``
does. Each point also prints its grid and what a 4 KB ring step adds to a chain of compute (the
waiting primitive the prediction prices its collectives by).

Writes ``tensor_parallel_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the
median |relative error| per world and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main


def extras(row: dict[str, Any]) -> str:
    """The grid, and the waiting primitive's latency."""
    sp = " SP" if row["sequence_parallel"] else ""
    return (f"t={row['t']} p={row['p']} d={row['d']}{sp} m={row['microbatches']}, ring step in "
            f"a chain {row['exchange_in_chain_s'] * 1e6:.0f} µs")


if __name__ == "__main__":
    main(__doc__, "tensor_parallel_accuracy", ["megatron"], extras)
