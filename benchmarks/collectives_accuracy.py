"""Chapter 2's collectives, predicted vs measured over message sizes, and ours against
PyTorch's built-in (book ch. 2).

    .venv/bin/python benchmarks/collectives_accuracy.py [--twins all_reduce.ring,…]
        [--worlds 2,4] [--quick | --points 64KiB:16MiB:x4] [--repeats 20]
        [--model textbook|host|both] [--runs 3] [--out benchmarks/results]

Every chapter-2 twin of the registry (:mod:`lab.twins_collectives`; ``--twins`` picks some,
e.g. the headline four ``all_reduce.ring,all_reduce.recursive_doubling,all_gather.ring,
broadcast.binomial``) through the shared runner (``_accuracy.py``): each run calibrates this
machine afresh (primitives only), then compares each algorithm with its simulated twin by
:func:`lab.compare.compare`, as ``distml-lab compare all_reduce.ring`` does — one launch per
world, each repeat running the operation back to back and taking the time per call. Each point
also prints PyTorch's built-in collective, timed in the same rounds (ours / PyTorch: below 1
means ours is faster), and nccl-tests' bus bandwidth.

Writes ``collectives_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the
median |relative error| per twin, world and model tier. Asserts nothing.
"""

from _accuracy import collective_extras, collective_twins, main

TWINS = collective_twins("2")

if __name__ == "__main__":
    main(__doc__, "collectives_accuracy", TWINS, collective_extras)
