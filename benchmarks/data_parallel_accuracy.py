"""DataParallel iteration time over the batch, predicted vs measured (book ch. 4).

    .venv/bin/python benchmarks/data_parallel_accuracy.py [--worlds 1,2,3,4]
        [--quick | --points 256,1000] [--repeats 20] [--model textbook|host|both] [--runs 3]
        [--out benchmarks/results]

The registry's ``data_parallel`` twin (:mod:`lab.strategies_data_parallel`; a world counts
replicas, threads of one process) through the shared runner (``_accuracy.py``), as
``distml-lab compare data_parallel`` compares it: one thread measures the primitives
(per-chunk forward and backward, loss, SGD step, copy and sum rates), the simulated twin
predicts the iteration from them, and the real ``DataParallel`` is timed. It reads no
calibration file, so a run calibrates nothing.

Writes ``data_parallel_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the
median |relative error| per number of replicas and model tier. Asserts nothing.
"""

from _accuracy import main

if __name__ == "__main__":
    main(__doc__, "data_parallel_accuracy", ["data_parallel"])
