"""Figures of chapters 1 and 3: the α-β model of one message, one-to-all schedules, and the
parameter server's bottleneck against the ring all-reduce.

Every number comes from :mod:`simulator` (closed forms and SimPy runs on data-sheet links);
nothing is measured, so each figure is the same on every machine.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from lab.figures.canvas import MiB, Registry, log2_ticks
from lab.units import format_size
from simulator.collectives.all_reduce import ring_all_reduce
from simulator.collectives.broadcast import (
    binomial_broadcast,
    binomial_broadcast_cost,
    linear_broadcast,
    linear_broadcast_cost,
    scatter_allgather_broadcast_cost,
)
from simulator.collectives.point_to_point import stream
from simulator.core import Cluster, Link, Topology, preset, run_spmd
from simulator.core.hardware import A100_80GB
from simulator.parameter_server import bottleneck_sweep, ps_vs_all_reduce

LINKS = {  # chapter 1's table of typical links: α (s), one-way bandwidth (B/s)
    "loopback TCP": Link(20e-6, 5e9),
    "100 Gb/s Ethernet": Link(10e-6, 12.5e9),
    "InfiniBand NDR": Link(2e-6, 50e9),
    "NVLink (A100)": Link(3e-6, 300e9),
}
ETHERNET_100G = LINKS["100 Gb/s Ethernet"]


def _pair(link: Link, p: int = 2) -> Cluster:
    """``p`` A100s, every pair on its own ``link``: the world of the closed forms."""
    return Cluster.homogeneous("pair", A100_80GB, Topology.fully_connected(p, link))


def ch01_alpha_beta() -> Figure:
    """T(n) = α + nβ for the table's links, with simulated one-way messages on top."""
    sizes = np.logspace(6, 30, 97, base=2)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (name, link) in enumerate(LINKS.items()):
        beta = 1 / link.bandwidth_Bps
        ax.loglog(sizes, link.latency_s + sizes * beta, color=f"C{i}", label=name)
        points = [2**k for k in range(6, 31, 4)]
        sim = [run_spmd(_pair(link), stream, n, trace=False).makespan_s for n in points]
        ax.loglog(points, sim, "o", color=f"C{i}", ms=4)
        half = link.latency_s / beta
        ax.plot([half], [2 * link.latency_s], "k*", ms=8)
    ax.plot([], [], "ko", ms=4, label="simulated message")
    ax.plot([], [], "k*", ms=8, label=r"$n_{1/2} = \alpha/\beta$: T = 2α")
    ax.set(xlabel="message size n (bytes)", ylabel="one-way time T(n) (s)",
           title="α-β model: flat (latency-bound) left of $n_{1/2}$, slope 1 right of it")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def ch01_effective_bandwidth() -> Figure:
    """B_eff(n)/B against n: every link reaches half its bandwidth at its own n½."""
    sizes = np.logspace(6, 30, 97, base=2)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for i, (name, link) in enumerate(LINKS.items()):
        half = link.latency_s * link.bandwidth_Bps
        ax.semilogx(sizes, sizes / (sizes + half), color=f"C{i}",
                    label=f"{name}, $n_{{1/2}}$ = {format_size(half)}")
        ax.axvline(half, color=f"C{i}", ls=":", lw=0.8)
    ax.axhline(0.5, color="gray", lw=0.8)
    ax.set(xlabel="message size n (bytes)", ylabel="share of the link's bandwidth",
           title="effective bandwidth n/(α+nβ)·β: the faster the link, the larger $n_{1/2}$")
    ax.legend(fontsize=7)
    return fig


def ch01_one_to_all() -> Figure:
    """Simulated timelines of the naive loop and the binomial tree, p = 8, 100 MB."""
    p, n = 8, 100_000_000
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ax, (name, program) in zip(axes, (("naive loop", linear_broadcast),
                                          ("binomial tree", binomial_broadcast)), strict=True):
        result = run_spmd(_pair(ETHERNET_100G, p), program, n)
        for s in result.trace:
            if s.kind == "send":
                ax.barh(s.rank, s.duration * 1e3, left=s.start * 1e3, height=0.6,
                        color="tab:blue", edgecolor="black", lw=0.4)
                ax.text((s.start + s.end) / 2 * 1e3, s.rank, s.name.split()[-1], fontsize=6,
                        ha="center", va="center", color="white")
        ax.set(title=f"{name}: {result.makespan_s * 1e3:.1f} ms", xlabel="time (ms)")
        ax.set_yticks(range(p), [f"rank {r}" for r in range(p)])
    axes[0].invert_yaxis()
    fig.suptitle("one-to-all of 100 MB on 100 Gb/s Ethernet, p = 8 (bars: sends)")
    fig.tight_layout()
    return fig


def ch01_one_to_all_vs_p() -> Figure:
    """Closed forms of the three one-to-all schedules against p, 100 MB on Ethernet."""
    n, alpha, beta = 100e6, ETHERNET_100G.latency_s, 1 / ETHERNET_100G.bandwidth_Bps
    ps = [2**k for k in range(1, 11)]
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    for label, cost in (("naive loop (p−1)(α+nβ)", linear_broadcast_cost),
                        ("binomial tree ⌈lg p⌉(α+nβ)", binomial_broadcast_cost),
                        ("scatter + all-gather", scatter_allgather_broadcast_cost)):
        ax.plot(ps, [cost(p, n, alpha, beta) * 1e3 for p in ps], "o-", ms=3, label=label)
    log2_ticks(ax, ps)
    ax.set_yscale("log")
    ax.set(xlabel="ranks p", ylabel="time (ms)", title="one-to-all of 100 MB, 100 Gb/s Ethernet")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def ch03_server_traffic() -> Figure:
    """Bytes through the busiest port per step: a PS server's W·M/S against the ring's
    2(W−1)/W·M (the ring's from a simulated run's per-link byte counts)."""
    m = 100 * MiB
    workers = [2, 4, 8, 16, 32]
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    for s in (1, 2, 4):
        ax.plot(workers, [2 * w * m / s / 1e9 for w in workers], "o-",
                label=f"PS server, S = {s} (push + pull)")
    ring = []
    for w in workers:
        bytes_per_channel = run_spmd(preset("ethernet-10g", w), ring_all_reduce, m,
                                     trace=False).bytes_per_channel
        ring.append(max(bytes_per_channel.values()) / 1e9)
    ax.plot(workers, ring, "s--", color="black", label="ring all-reduce, any rank (simulated)")
    log2_ticks(ax, workers)
    ax.set(xlabel="workers W", ylabel="GB through the busiest port per step",
           title="a 100 MiB model: the server's port grows with W, the ring's does not")
    ax.legend(fontsize=8)
    return fig


def ch03_bottleneck() -> Figure:
    """Time per BSP iteration as servers are added: PS-Lite's queued van stops improving at
    S = W·B_w/B_s; this lab's rendezvous van keeps improving."""
    servers = [1, 2, 4, 8, 12]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for rendezvous, style in ((False, "o-"), (True, "s--")):
        for server_Bps in (10e9, 40e9):
            t = bottleneck_sweep(8, server_Bps, 10e9, 40e6, servers, rendezvous=rendezvous,
                                 iterations=2)
            van = "rendezvous van (this lab)" if rendezvous else "queued van (PS-Lite)"
            ax.plot(servers, [x * 1e3 for x in t], style, ms=4,
                    label=f"{van}, servers at {server_Bps / 1e9:.0f} GB/s")
    ax.axvline(8, c="grey", lw=0.8)
    ax.axvline(2, c="grey", lw=0.8, ls=":")
    ax.set(xlabel="servers S", ylabel="time per iteration (ms)",
           title="8 workers at 10 GB/s, a 40 MB dense model, BSP")
    ax.legend(fontsize=7)
    return fig


def ch03_ps_vs_ring() -> Figure:
    """Simulated time per iteration: BSP parameter server (2 servers) against the ring
    all-reduce, for a dense gradient and for one touching 1 % of the keys."""
    ws = [2, 4, 8, 16]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for touched, style in ((1.0, "-"), (0.01, "--")):
        pairs = [ps_vs_all_reduce(lambda p: preset("ethernet-10g", p), w, 2, 2_500_000,
                                  touched, 5e-3, iterations=2) for w in ws]
        ax.plot(ws, [q[0] * 1e3 for q in pairs], "o" + style, c="tab:orange",
                label=f"parameter server, {touched:.0%} of keys touched")
        ax.plot(ws, [q[1] * 1e3 for q in pairs], "s" + style, c="tab:blue",
                label="ring all-reduce (always the dense gradient)" if touched == 1.0 else None)
    log2_ticks(ax, ws)
    ax.set_yscale("log")
    ax.set(xlabel="workers W", ylabel="time per iteration (ms)",
           title="10 MB model, 2 servers, 10 Gb/s Ethernet (simulated)")
    ax.legend(fontsize=7)
    return fig


FIGURES: Registry = {
    "ch01-alpha-beta": (1, ch01_alpha_beta),
    "ch01-effective-bandwidth": (1, ch01_effective_bandwidth),
    "ch01-one-to-all": (1, ch01_one_to_all),
    "ch01-one-to-all-vs-p": (1, ch01_one_to_all_vs_p),
    "ch03-server-traffic": (3, ch03_server_traffic),
    "ch03-bottleneck": (3, ch03_bottleneck),
    "ch03-ps-vs-ring": (3, ch03_ps_vs_ring),
}
"""This module's figures by file name."""

