"""Figures of chapters 22–23: mixture-of-experts capacity, all-to-all traffic and skew; the
zero-bubble pipeline schedules, their bubbles and their activation memory.

Expert parallelism comes from :mod:`simulator.moe` (routing histograms, exchange bytes, one
simulated step on the DGX A100 preset); the schedules from
:mod:`simulator.pipeline.schedules.zero_bubble` placed in time by
:func:`~simulator.pipeline.schedules.split_backward.timeline_split`, and simulated on
NVLink-connected A100s by :func:`simulator.pipeline.zero_bubble.simulate_zero_bubble`.
Everything is a closed form or a deterministic simulation: the same picture every time.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from lab.figures.canvas import MiB, Registry, draw_schedule, log2_ticks
from simulator.core import Cluster, Topology, preset
from simulator.core.hardware import A100_80GB, NVLINK3
from simulator.moe import (
    RankCost,
    busiest_bytes,
    capacity,
    exchange_bytes,
    routing_histogram,
    simulate_moe_step,
)
from simulator.pipeline import Action, one_f_one_b, timeline
from simulator.pipeline.schedules.split_backward import (
    idle_share,
    in_flight_split,
    timeline_split,
)
from simulator.pipeline.schedules.zero_bubble import ZERO_BUBBLE, dualpipe_v, zb_h1, zb_v
from simulator.pipeline.zero_bubble import SplitStageCost, simulate_zero_bubble

BF16 = 2
"""Bytes of one bf16 element."""

TOKENS, WIDTH, HIDDEN = 4096, 4096, 4096
"""The MoE layer of chapter 22's traffic and skew figures: tokens per rank, model width d and
expert hidden width h."""


def _expert_costs(counts: list[list[int]], tokens: int, experts: int) -> list[RankCost]:
    """Each rank's seconds on an A100 at its data-sheet rate: the router (``2·T·d·E`` FLOP
    forward, twice that backward) and its experts on the rows they received (a two-matrix
    MLP, ``4·d·h`` FLOP per row forward, twice that backward)."""
    p = len(counts)
    m = experts // p
    rate = A100_80GB.flops_per_s
    route_s = 2 * tokens * WIDTH * experts / rate
    costs = []
    for j in range(p):
        rows = sum(sum(row[j * m:(j + 1) * m]) for row in counts)
        expert_s = rows * 4 * WIDTH * HIDDEN / rate
        costs.append(RankCost(route_s, 2 * route_s, expert_s, 2 * expert_s))
    return costs


def ch22_capacity() -> Figure:
    """Dropped share of the assignments of a 1024-token group over 8 experts as one expert gets
    hotter, for three capacity factors and k = 1, 2."""
    tokens, experts = 1024, 8
    hot = np.linspace(0.0, 0.6, 25)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for n, cf in enumerate((1.0, 1.25, 2.0)):
        for k, style in ((1, "-"), (2, "--")):
            dropped = [routing_histogram(tokens, experts, k, cf, 1, float(h))[1]
                       / (tokens * k) for h in hot]
            ax.plot(hot, dropped, style, color=f"C{n}",
                    label=f"$c_f$ = {cf}, k = {k} (C = {capacity(tokens, experts, k, cf)})")
    ax.set(xlabel="share of tokens whose first choice is expert 0",
           ylabel="share of assignments dropped",
           title="T = 1024 tokens, E = 8 experts: drops start when demand passes C")
    ax.legend(fontsize=7)
    return fig


def ch22_traffic() -> Figure:
    """Left: bytes per rank per dispatch against expert ranks (64 experts) for k = 1, 2, 8.
    Right: one simulated training step of the layer (k = 2) on the DGX A100 preset, split into
    its all-to-alls and its expert compute."""
    experts = 64
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    worlds = [2, 4, 8, 16, 32, 64]
    for k in (1, 2, 8):
        sent = [busiest_bytes(exchange_bytes(
            routing_histogram(TOKENS, experts, k, 1.25, p)[0], WIDTH, BF16)) / MiB
            for p in worlds]
        left.plot(worlds, sent, "o-", ms=4, label=f"k = {k}")
        left.axhline(TOKENS * k * WIDTH * BF16 / MiB, color="0.6", lw=0.6, ls=":")
    log2_ticks(left, worlds)
    left.set(xlabel="expert-parallel ranks p", ylabel="MiB sent per dispatch",
             title="T·k·d·s·(p−1)/p (dotted: T·k·d·s)")
    left.legend(fontsize=8)
    sims = [2, 4, 8, 16, 32]
    parts: dict[str, list[float]] = {"all-to-alls": [], "experts": [], "router and counts": []}
    for p in sims:
        counts = routing_histogram(TOKENS, experts, 2, 1.25, p)[0]
        run = simulate_moe_step(preset("a100", p), counts, _expert_costs(counts, TOKENS, experts),
                                WIDTH, BF16)
        spans = [s for s in run.trace.for_rank(0) if s.kind in ("collective", "compute")]
        a2a = sum(s.end - s.start for s in spans if s.kind == "collective")
        work = sum(s.end - s.start for s in spans if s.name.startswith("experts"))
        parts["all-to-alls"].append(a2a * 1e3)
        parts["experts"].append(work * 1e3)
        parts["router and counts"].append((run.makespan_s - a2a - work) * 1e3)
    bottom = np.zeros(len(sims))
    for n, (name, values) in enumerate(parts.items()):
        right.bar(range(len(sims)), values, bottom=bottom, color=f"C{n + 3}", label=name)
        bottom += values
    right.set_xticks(range(len(sims)), [str(p) for p in sims])
    right.set(xlabel="expert-parallel ranks p (8 per node)", ylabel="step of one layer (ms)",
              title="simulated on DGX A100: k = 2, 4096 tokens per rank")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def ch22_skew() -> Figure:
    """Rows received by the busiest and the idlest rank and the simulated step on 8 A100s (64
    experts, top-2) as one expert gets hotter, with c_f = 1.25 and with no drops."""
    p, experts, k = 8, 64, 2
    hot = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for n, (cf, name) in enumerate(((1.25, "$c_f$ = 1.25"), (experts / k, "no drops"))):
        most, least, step = [], [], []
        for h in hot:
            counts, dropped = routing_histogram(TOKENS, experts, k, cf, p, h)
            m = experts // p
            rows = [sum(sum(row[j * m:(j + 1) * m]) for row in counts) for j in range(p)]
            most.append(max(rows))
            least.append(min(rows))
            step.append(simulate_moe_step(preset("a100", p), counts,
                                          _expert_costs(counts, TOKENS, experts), WIDTH, BF16,
                                          trace=False).makespan_s * 1e3)
            if cf == 1.25 and h in (0.1, 0.3, 0.5):
                right.annotate(f"{dropped / (TOKENS * k):.0%}\ndropped", (h, step[-1]),
                               textcoords="offset points", xytext=(0, 8), ha="center",
                               fontsize=7, color=f"C{n}")
        left.plot(hot, most, "o-", ms=4, color=f"C{n}", label=f"busiest rank, {name}")
        left.plot(hot, least, "o--", ms=4, color=f"C{n}", label=f"idlest rank, {name}")
        right.plot(hot, step, "o-", ms=4, color=f"C{n}", label=name)
    left.axhline(TOKENS * k, color="0.6", lw=0.6, ls=":")
    left.set(xlabel="share of first choices on expert 0", ylabel="rows received per rank",
             title="8 ranks × 8 experts, T = 4096, k = 2 (dotted: T·k)")
    left.legend(fontsize=7)
    right.set(xlim=(-0.03, 0.56), xlabel="share of first choices on expert 0",
              ylabel="step of one layer (ms)",
              title="the busiest rank sets the step (simulated, DGX A100)")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _a100s(p: int) -> Cluster:
    """``p`` A100s, every pair on its own NVLink."""
    return Cluster.homogeneous(f"{p}xA100", A100_80GB, Topology.fully_connected(p, NVLINK3))


def _split_labels(spans: list[list[tuple[float, float, Action]]]) -> list[list[str]]:
    """``F3``, ``I3``, ``W3``, ``B3`` (``3'`` for chunk 1) for each span's action."""
    return [[f"{a.kind}{a.microbatch}" + ("'" if a.chunk else "") for _, _, a in row]
            for row in spans]


def ch23_zb_h1() -> Figure:
    """1F1B against ZB-H1 on 4 stages, 8 micro-batches, T_F = T_I = T_W = 1: the W's move
    into the cool-down, the bubble falls from 3(p − 1) to (p − 1) units."""
    p, m = 4, 8
    fig, axes = plt.subplots(2, 1, figsize=(10, 4.4), sharex=True)
    spans = timeline(one_f_one_b(p, m), 1.0, 2.0)
    end = max(row[-1][1] for row in spans)
    draw_schedule(axes[0], spans, title=f"1F1B (B = I + W fused): {end:.0f} units, bubble "
                                        f"{1 - 3 * m / end:.0%}")
    split = timeline_split(zb_h1(p, m))
    end = max(row[-1][1] for row in split)
    draw_schedule(axes[1], split, _split_labels(split),
                  title=f"ZB-H1: {end:.0f} units, bubble {idle_share(split):.0%} "
                        "(orange: I and W; W runs where 1F1B idles)")
    axes[1].set_xlabel("time (F = I = W = 1 unit)")
    fig.tight_layout()
    return fig


def ch23_v_schedules() -> Figure:
    """ZB-V and DualPipe-V on 4 ranks, 8 micro-batches, each rank holding two chunks in a V
    (chunk 1 lighter, labelled with a prime)."""
    p, m = 4, 8
    fig, axes = plt.subplots(2, 1, figsize=(11, 4.6), sharex=True)
    for ax, (name, make) in zip(axes, (("ZB-V", zb_v), ("DualPipe-V", dualpipe_v)),
                                strict=True):
        spans = timeline_split(make(p, m), "v", 0.5, 0.5, 0.5)
        end = max(row[-1][1] for row in spans)
        draw_schedule(ax, spans, _split_labels(spans),
                      title=f"{name}: {end:g} units, bubble {idle_share(spans):.0%}")
        ax.set_yticks(range(p), [f"rank {r}" for r in range(p)])
    axes[1].set_xlabel("time (a whole stage's F = I = W = 1 unit; a chunk is half a stage)")
    fig.tight_layout()
    return fig


def _stage_costs(stages: int, total_stages: int) -> list[SplitStageCost]:
    """An 8-layer model cut into ``total_stages`` equal stages; per layer and micro-batch
    F = I = W = 1 ms, 64 MiB of activations, a 16 MiB output."""
    share = 8 / total_stages
    return [SplitStageCost(share * 1e-3, share * 1e-3, share * 1e-3, int(share * 64 * MiB),
                           16 * MiB) for _ in range(total_stages)]


NAMES = {"zb_h1": "ZB-H1", "zbv": "ZB-V", "dualpipev": "DualPipe-V"}
"""The schedules' names as the book writes them."""


def ch23_bubble() -> Figure:
    """Simulated idle share on 4 NVLink A100s against micro-batches: 1F1B's (p−1)/(m+p−1)
    closed form, ZB-H1, ZB-V and DualPipe-V."""
    p = 4
    ms = [8, 12, 16, 24, 32]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(ms, [(p - 1) / (m + p - 1) for m in ms], "k--", label="1F1B: (p−1)/(m+p−1)")
    for name in ZERO_BUBBLE:
        chunks = 2 if ZERO_BUBBLE[name][1] == "v" else 1
        sims = [simulate_zero_bubble(_a100s(p), _stage_costs(p, p * chunks), m, name,
                                     trace=False).bubble_fraction for m in ms]
        ax.plot(ms, sims, "o-", ms=4, label=NAMES[name])
    ax.set(xlabel="micro-batches m", ylabel="idle share of the step", ylim=(0, None),
           title="4 stages on NVLink A100s, F = I = W (simulated)")
    ax.legend(fontsize=8)
    return fig


def ch23_memory() -> Figure:
    """Peak activations per rank, in micro-batches of a whole stage, for 1F1B, ZB-H1, ZB-V and
    DualPipe-V on 4 ranks, 8 micro-batches (a V chunk holds half a stage)."""
    p, m = 4, 8
    held = {"1F1B": [float(in_flight_split(a)) for a in one_f_one_b(p, m)],
            "ZB-H1": [float(in_flight_split(a)) for a in zb_h1(p, m)],
            "ZB-V": [in_flight_split(a) / 2 for a in zb_v(p, m)],
            "DualPipe-V": [in_flight_split(a) / 2 for a in dualpipe_v(p, m)]}
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    width = 0.2
    for k, (name, values) in enumerate(held.items()):
        ax.bar(np.arange(p) + k * width, values, width, label=name)
    ax.set_xticks(np.arange(p) + 1.5 * width, [f"rank {r}" for r in range(p)])
    ax.set(ylabel="peak activations\n(micro-batches of one stage)", ylim=(0, 6),
           title="p = 4, m = 8: ZB-H1 and ZB-V hold p on every rank")
    ax.legend(fontsize=8, ncols=2)
    return fig


FIGURES: Registry = {
    "ch22-capacity": (22, ch22_capacity),
    "ch22-traffic": (22, ch22_traffic),
    "ch22-skew": (22, ch22_skew),
    "ch23-zb-h1": (23, ch23_zb_h1),
    "ch23-v-schedules": (23, ch23_v_schedules),
    "ch23-bubble": (23, ch23_bubble),
    "ch23-memory": (23, ch23_memory),
}
"""This module's figures by file name."""
