"""Collectives on the shaped network (a cluster on this laptop), predicted vs measured, and
ours against PyTorch's built-in (book ch. 2).

    .venv/bin/python benchmarks/shaped_accuracy.py [--bandwidth 100mbit] [--worlds 2,3,4]
        [--points 256KiB,1MiB,4MiB] [--repeats 5] [--model textbook|host|both] [--runs 3]
        [--out benchmarks/results]
    .venv/bin/python benchmarks/shaped_accuracy.py --bandwidth 100mbit,100mbit,100mbit,25mbit \\
        --worlds 4 --twins all_reduce.ring,all_reduce.binary_tree

Needs root and iproute2 (:mod:`backends.shaped`): every rank runs in a network namespace of
its own, on a link of ``--bandwidth`` (one rate, or one per rank). The ring all-reduce, the
ring all-gather, the binomial broadcast and the pairwise all-to-all through the shared runner
(``_accuracy.py``): each run calibrates the shaped network afresh (primitives only: the
ping-pong, the concurrent shift, the send buffer, reduction, copy, matmul), then compares each
algorithm with its simulated twin on that network by :func:`lab.compare.compare`, as
``distml-lab compare all_reduce.ring --network shaped --bandwidth 100mbit`` does. The second
command is the heterogeneous case: one rank on a slower link, the ring against the tree.
Each point also prints PyTorch's built-in collective, timed in the same rounds, and the bus
bandwidth. By default 256 KiB, 1 MiB and 4 MiB, 5 repeats: each world takes minutes at
100 Mbit/s.

Writes ``shaped_accuracy-<run id>.json``/``.csv`` (new files every run) and prints the median
|relative error| per twin, world and model tier. Asserts nothing.
"""

from _accuracy import collective_extras, main

TWINS = ["all_reduce.ring", "all_gather.ring", "broadcast.binomial", "all_to_all.pairwise"]
HETEROGENEOUS = ["all_reduce.binary_tree"]
"""What ``--twins`` may add for the heterogeneous case: the tree beside the ring."""

if __name__ == "__main__":
    main(__doc__, "shaped_accuracy", TWINS, collective_extras, shaped=True, more=HETEROGENEOUS,
         points="256KiB,1MiB,4MiB", repeats=5)
