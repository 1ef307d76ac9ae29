"""Parameter-server time per iteration, predicted vs measured: BSP, SSP and asynchronous
(book ch. 3).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ps_accuracy.py [--twins ps.bsp,…]
        [--worlds 2,3] [--quick | --points 1,2] [--repeats 20] [--model textbook|host|both]
        [--runs 3] [--out benchmarks/results]

The registry's ``ps.bsp``, ``ps.ssp`` and ``ps.async`` twins (:mod:`lab.strategies_ps`; a world
counts workers, a point servers) through the shared runner (``_accuracy.py``): each run
calibrates this machine afresh at every ``1 + servers + workers`` processes the sweep starts,
then compares the time per iteration with :func:`lab.parameter_server.predict`'s, as
``distml-lab compare ps.bsp`` does. One launch of a configuration can differ from the next by
half on a shared 2-core machine, and so can the calibrated α: ``--runs 3`` gives the median
over fresh calibrations and its spread. Each point also prints the workers' idle time, the
largest staleness and the throughput, measured and predicted.

Writes ``ps_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the median
|relative error| per consistency model, number of workers and model tier. Asserts nothing.
"""

from __future__ import annotations

from typing import Any

from _accuracy import main

TWINS = ["ps.bsp", "ps.ssp", "ps.async"]


def extras(row: dict[str, Any]) -> str:
    """Idle time, largest staleness and throughput, measured (predicted)."""
    return (f"idle {row['measured_idle_s'] * 1e3:.2f} ms ({row['predicted_idle_s'] * 1e3:.2f}),"
            f" staleness ≤ {row['measured_max_staleness']} "
            f"({row['predicted_max_staleness']}), throughput "
            f"{row['measured_throughput']:.0f}/s ({row['predicted_throughput']:.0f}/s)")


if __name__ == "__main__":
    main(__doc__, "ps_accuracy", TWINS, extras)
