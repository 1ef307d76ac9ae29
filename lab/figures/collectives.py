"""Figures of chapter 2: the ring all-reduce chunk by chunk, its timeline, and how the
all-reduce algorithms compare as the message and the world grow.

The chunk grid is replayed from a simulated run (the order of the messages each rank sent),
not drawn from the formulas, so it shows what the simulated twin does.
"""

from __future__ import annotations

import math
from copy import deepcopy

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from lab.figures.canvas import KiB, MiB, Registry, log2_ticks
from lab.figures.foundations import ETHERNET_100G
from lab.plots import plot_timelines
from lab.units import format_size
from simulator.collectives import ALGORITHMS
from simulator.collectives.all_gather import ring_all_gather_chunks
from simulator.collectives.all_reduce import ring_all_reduce
from simulator.collectives.reduce_scatter import ring_reduce_scatter_chunks
from simulator.core import Cluster, SimComm, Topology, Trace, preset, run_spmd
from simulator.core.comm import SimGen
from simulator.core.hardware import A100_80GB

P = 4
TAGS = [(c + 1) * KiB for c in range(P)]
"""Chunk ``c`` is ``c + 1`` KiB, so a message's size names the chunk it carries."""


def _tagged_ring(comm: SimComm) -> SimGen:
    yield from ring_reduce_scatter_chunks(comm, TAGS)  # chunk r is now complete on rank r
    yield from ring_all_gather_chunks(comm, TAGS, mine=comm.rank)


def ring_states() -> tuple[list[list[list[set[int]]]], list[set[tuple[int, int]]]]:
    """Replay a simulated ring all-reduce on ``P`` ranks: after each step, for each rank and
    chunk, whose inputs it holds (and which cells just arrived)."""
    cluster = Cluster.homogeneous("fc", A100_80GB, Topology.fully_connected(P, ETHERNET_100G))
    trace = run_spmd(cluster, _tagged_ring).trace
    sent = [sorted((s for s in trace.for_rank(r) if s.kind == "send"), key=lambda s: s.start)
            for r in range(P)]
    held = [[{r} for _ in range(P)] for r in range(P)]
    states = [deepcopy(held)]
    arrivals: list[set[tuple[int, int]]] = [set()]
    for step in range(2 * (P - 1)):
        before, arrived = deepcopy(held), set[tuple[int, int]]()
        for r in range(P):
            span = sent[r][step]
            dst, c = int(span.name.split("->")[1]), TAGS.index(span.nbytes)
            held[dst][c] = before[dst][c] | before[r][c] if step < P - 1 else set(before[r][c])
            arrived.add((dst, c))
        states.append(deepcopy(held))
        arrivals.append(arrived)
    return states, arrivals


def ch02_ring_chunks() -> Figure:
    """The chunk grid after each step of a simulated ring all-reduce, p = 4."""
    states, arrivals = ring_states()
    fig, axes = plt.subplots(2, P, figsize=(11, 5.8))
    titles = (["start"] + [f"reduce-scatter step {s}" for s in range(1, P)]
              + [f"all-gather step {s}" for s in range(1, P)])
    panels = [axes[0][i] for i in range(P)] + [axes[1][i] for i in range(1, P)]
    for ax, held, arrived, title in zip(panels, states, arrivals, titles, strict=True):
        for r in range(P):
            for c in range(P):
                who = held[r][c]
                full = len(who) == P
                colour = ("tab:green" if full
                          else plt.cm.Blues(0.15 + 0.55 * (len(who) - 1) / (P - 1)))
                new = (r, c) in arrived
                ax.add_patch(Rectangle((c, r), 1, 1, facecolor=colour,
                                       edgecolor="tab:red" if new else "white",
                                       lw=3 if new else 1))
                ax.text(c + 0.5, r + 0.5, "Σ" if full else "+".join(map(str, sorted(who))),
                        ha="center", va="center", fontsize=8)
        ax.set(xlim=(0, P), ylim=(P, 0), title=title, xticks=np.arange(P) + 0.5,
               yticks=np.arange(P) + 0.5, xticklabels=[f"c{c}" for c in range(P)],
               yticklabels=[f"rank {r}" for r in range(P)])
        ax.set_aspect("equal")
        ax.tick_params(length=0)
    axes[1][0].axis("off")
    axes[1][0].text(0, 0.5, "cell: whose inputs chunk c\nholds on rank r\n\n"
                    "red border: arrived this step\nΣ: all four inputs", fontsize=9,
                    va="center")
    fig.suptitle("ring all-reduce, p = 4: rank r sends to r+1, one chunk per step")
    fig.tight_layout()
    return fig


def ch02_ring_timeline() -> Figure:
    """A simulated ring all-reduce of 64 MiB on 4 A100s of one DGX node (NVSwitch)."""
    result = run_spmd(preset("a100", 4), ring_all_reduce, 64 * MiB)
    busy = Trace(s for s in result.trace if s.kind != "recv")
    return plot_timelines(busy, title="ring all-reduce, 64 MiB, 4 A100 (NVSwitch)")


def _alpha_beta_gamma(cluster: Cluster) -> tuple[float, float, float]:
    topo = cluster.topology
    return (topo.path_latency_s(0, 1), 1 / topo.path_bandwidth_Bps(0, 1),
            cluster.devices[0].gamma_s_per_B)


def _lower_bound(p: int, n: float, alpha: float, beta: float, gamma: float) -> float:
    return (p - 1).bit_length() * alpha + (p - 1) / p * n * (2 * beta + gamma)


FORMULAS = {name: ALGORITHMS["all_reduce"][name][1]
            for name in ("reduce_broadcast", "recursive_doubling", "rabenseifner", "ring")}


def ch02_allreduce_vs_p() -> Figure:
    """Closed-form all-reduce time against p on 10 Gb/s Ethernet, for a small and a large
    message: the ring's 2(p−1)α against the trees' lg p."""
    alpha, beta, gamma = _alpha_beta_gamma(preset("ethernet-10g", 8))
    worlds = [2**k for k in range(1, 11)]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, n in zip(axes, (4 * KiB, 64 * MiB), strict=True):
        for name, cost in FORMULAS.items():
            assert cost is not None
            ax.plot(worlds, [cost(p, n, alpha, beta, gamma) for p in worlds], "o-", ms=3,
                    label=name)
        ax.plot(worlds, [_lower_bound(p, n, alpha, beta, gamma) for p in worlds], "k:",
                label="lower bound")
        log2_ticks(ax, worlds)
        ax.set_yscale("log")
        ax.set(xlabel="ranks p", ylabel="time (s)", title=f"all-reduce of {format_size(n)}")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("10 Gb/s Ethernet: latency-bound (left) and bandwidth-bound (right)")
    fig.tight_layout()
    return fig


def ch02_allreduce_crossover() -> Figure:
    """Simulated all-reduce time against message size on 8 ranks of 10 Gb/s Ethernet."""
    cluster = preset("ethernet-10g", 8)
    sizes = [2**k for k in range(10, 27, 2)]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name in ("binary_tree", "recursive_doubling", "ring"):
        program = ALGORITHMS["all_reduce"][name][0]
        times = [run_spmd(cluster, program, n, trace=False).makespan_s for n in sizes]
        ax.loglog(sizes, times, "o-", ms=3, label=f"{name} (simulated)")
    alpha, beta, _ = _alpha_beta_gamma(cluster)
    ax.axvline(alpha / beta, color="gray", ls=":", lw=1)
    ax.text(alpha / beta, ax.get_ylim()[1], r" $\alpha/\beta$", va="top", fontsize=8)
    ticks = sizes[::2]
    ax.set_xticks(ticks, [format_size(n) for n in ticks])
    ax.minorticks_off()
    ax.set(xlabel="message size", ylabel="time (s)",
           title="all-reduce on 8 ranks, 10 Gb/s Ethernet: where the ring takes over")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def ch02_bus_bandwidth() -> Figure:
    """Bus bandwidth 2(p−1)/p·n/T of the simulated ring on DGX A100 nodes: it approaches the
    slowest link's bandwidth as n grows, and drops when the ring leaves the node."""
    sizes = [2**k for k in range(12, 31, 2)]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for p in (8, 16):
        cluster = preset("a100", p)
        bus = []
        for n in sizes:
            t = run_spmd(cluster, ring_all_reduce, n, trace=False).makespan_s
            bus.append(2 * (p - 1) / p * n / t / 1e9)
        ax.semilogx(sizes, bus, "o-", ms=3, label=f"p = {p} ({math.ceil(p / 8)} node(s))")
    ax.set_xticks(sizes[::2], [format_size(n) for n in sizes[::2]])
    ax.minorticks_off()
    ax.set(xlabel="message size", ylabel="bus bandwidth (GB/s)",
           title="simulated ring all-reduce on DGX A100 (NVLink 300 GB/s, HDR 25 GB/s)")
    ax.legend(fontsize=8)
    return fig


FIGURES: Registry = {
    "ch02-ring-chunks": (2, ch02_ring_chunks),
    "ch02-ring-timeline": (2, ch02_ring_timeline),
    "ch02-allreduce-vs-p": (2, ch02_allreduce_vs_p),
    "ch02-allreduce-crossover": (2, ch02_allreduce_crossover),
    "ch02-bus-bandwidth": (2, ch02_bus_bandwidth),
}
"""This module's figures by file name."""
