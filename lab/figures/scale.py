"""Chapter 2 at cluster scale: all-reduce on a 4,096-GPU leaf-spine fat tree whose spine links
are oversubscribed, and where the contention lands.

A leaf switch holds 32 GPUs, each on a 25 GB/s link (HDR InfiniBand); 128 leaves join through
``spines`` spine switches, one 25 GB/s link from every leaf to every spine. With 32 spines
the tree has full bisection bandwidth; with 8, each leaf's 32 GPUs share 8 uplinks — 4:1
oversubscribed, as most production clusters are above the rack. A message between leaves
climbs to spine ``(src + dst) mod spines`` (a fixed ECMP-like spread).

The binary tree and the hierarchical all-reduce (a binomial reduce inside each leaf, a ring
among the 128 leaf leaders, a broadcast inside each leaf) run in the per-rank simulation
(every message an event, ``fair`` sharing). The ring's ``2(p−1)`` steps all look alike, so
its time comes from the fast path (:func:`~simulator.collectives.all_reduce.ring_all_reduce_fast`:
one step simulated, then replayed) and its bytes per link from one simulated step times
``2(p−1)``. "Ranks scattered" places rank ``r`` on leaf ``r mod 128``, so that every ring
neighbour is on another leaf: every message crosses the spine, and the fixed spine choice
sends all 32 messages entering a leaf down the same spine link (an ECMP collision).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from lab.figures.canvas import GiB, Registry
from simulator.collectives.all_reduce import (
    binary_tree_all_reduce,
    hierarchical_all_reduce,
    ring_all_reduce_fast,
)
from simulator.collectives.fast import ring_step
from simulator.core import Cluster, Link, Topology, run_spmd
from simulator.core.comm import SimGen
from simulator.core.hardware import A100_80GB
from simulator.core.network import Channel, Node

GPUS = 4096
PER_LEAF = 32
HDR = Link(latency_s=5e-6, bandwidth_Bps=25e9)
NBYTES = 4 * GiB  # a 1-billion-parameter model's float32 gradients
SPINES = {"full bisection (32 spines)": 32, "4:1 oversubscribed (8 spines)": 8}


def fat_tree(spines: int, strided: bool = False, gpus: int = GPUS) -> Cluster:
    """``gpus`` A100s (4,096) on a two-tier fat tree with ``spines`` spine switches.

    ``strided``: rank ``r`` sits on leaf ``r mod leaves`` instead of ``r // 32`` — a job
    scheduler that placed ranks without regard to the topology, so that neighbours in rank
    order are on different leaves."""
    leaves = gpus // PER_LEAF

    def leaf(rank: int) -> str:
        return f"leaf{rank % leaves if strided else rank // PER_LEAF}"

    links: dict[frozenset[Node], Link] = {frozenset((r, leaf(r))): HDR for r in range(gpus)}
    links.update({frozenset((f"leaf{i}", f"spine{j}")): HDR
                  for i in range(leaves) for j in range(spines)})

    def router(_: Topology, src: int, dst: int) -> list[Node]:
        a, b = leaf(src), leaf(dst)
        if src == dst:
            return [src]
        return [src, a, dst] if a == b else [src, a, f"spine{(src + dst) % spines}", b, dst]

    name = f"fat-tree-{gpus}x{spines}{'-strided' if strided else ''}"
    return Cluster(name, (A100_80GB,) * gpus, Topology(gpus, links, "fat_tree", router))


def _ring(cluster: Cluster) -> tuple[float, dict[Channel, int]]:
    p = cluster.world_size
    step = run_spmd(cluster, ring_step, NBYTES // p, trace=False).bytes_per_channel
    return (ring_all_reduce_fast(cluster, NBYTES),
            {c: b * 2 * (p - 1) for c, b in step.items()})


def _events(program: Callable[..., SimGen], **kwargs: Any
            ) -> Callable[[Cluster], tuple[float, dict[Channel, int]]]:
    def run(cluster: Cluster) -> tuple[float, dict[Channel, int]]:
        result = run_spmd(cluster, program, NBYTES, trace=False, **kwargs)
        return result.makespan_s, result.bytes_per_channel
    return run


ALGORITHMS: dict[str, tuple[bool, Callable[[Cluster], tuple[float, dict[Channel, int]]]]] = {
    "ring": (False, _ring),
    "ring, ranks scattered": (True, _ring),
    "binary tree": (False, _events(binary_tree_all_reduce)),
    "hierarchical": (False, _events(hierarchical_all_reduce, ranks_per_node=PER_LEAF)),
}
"""Each algorithm: (ranks scattered over the leaves?, cluster → (time, bytes per channel))."""


def _spine_utilisation(cluster: Cluster, makespan_s: float,
                       bytes_per_channel: dict[Channel, int]) -> np.ndarray:
    """Busy fraction of every leaf↔spine channel (both directions) over the all-reduce,
    sorted, busiest first."""
    pairs = [(a, b) for a, b in map(tuple, cluster.topology.links)]
    channels: list[Channel] = [c for a, b in pairs for c in ((a, b), (b, a))
                               if any(str(node).startswith("spine") for node in c)]
    used = [bytes_per_channel.get(c, 0) / (HDR.bandwidth_Bps * makespan_s) for c in channels]
    return np.sort(np.array(used))[::-1]


def ch02_fat_tree_allreduce(gpus: int = GPUS) -> Figure:
    """Time of all-reduce algorithms on a fat tree of ``gpus`` GPUs (4,096) at full and 4:1
    bisection, and how busy each leaf↔spine link is under the oversubscribed tree."""
    results = {label: {name: fn(fat_tree(spines, strided, gpus))
                       for name, (strided, fn) in ALGORITHMS.items()}
               for label, spines in SPINES.items()}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.0))
    names = list(ALGORITHMS)
    x = np.arange(len(names))
    for i, (label, got) in enumerate(results.items()):
        bars = left.bar(x + (i - 0.5) * 0.38, [got[name][0] for name in names], 0.38,
                        label=label)
        left.bar_label(bars, fmt="%.1f", fontsize=7)
    left.set_xticks(x, names, fontsize=8)
    left.set(ylabel="all-reduce time (s)",
             title=f"{NBYTES // GiB} GiB on {gpus:,} GPUs, {PER_LEAF} per leaf")
    left.legend(fontsize=8)
    spines = min(SPINES.values())
    label = next(k for k, v in SPINES.items() if v == spines)
    for name in names:
        makespan, per_channel = results[label][name]
        cluster = fat_tree(spines, ALGORITHMS[name][0], gpus)
        busy = _spine_utilisation(cluster, makespan, per_channel)
        right.plot(np.arange(1, len(busy) + 1), busy * 100, label=name)
    right.set_xscale("log")
    right.set(xlabel="leaf↔spine link (one direction), busiest first",
              ylabel="busy (% of the all-reduce)", title=f"where the bytes go: {label}")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


FIGURES: Registry = {
    "ch02-fat-tree-allreduce": (2, ch02_fat_tree_allreduce),
}
"""This module's figures by file name."""
