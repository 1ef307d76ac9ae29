"""Figures of chapters 8–11: GPipe and 1F1B schedules, the bubble, activation memory and
checkpointing, torchgpipe's clock cycles and balance, PipeDream's weight stashing and versions.

Schedules come from :mod:`simulator.pipeline.schedules` (the lists both twins run), timed by
its critical path or by :func:`simulator.pipeline.simulate_pipeline` on an A100 cluster.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from lab.figures.canvas import MiB, Registry, draw_schedule, log2_ticks
from lab.plots import plot_timelines
from simulator.core import Cluster, Link, Topology
from simulator.core.hardware import A100_80GB, NVLINK3
from simulator.pipeline import (
    Action,
    LayerProfile,
    balance_by_size,
    balance_by_time,
    bubble_fraction,
    clock_cycles,
    gpipe,
    one_f_one_b,
    pipedream_2bw,
    pipedream_async,
    plan_pipedream,
    plan_time,
    simulate_pipeline,
    timeline,
    uniform_profile,
)

KiB = 2**10


def _a100s(p: int) -> Cluster:
    """``p`` A100s, every pair on its own NVLink."""
    return Cluster.homogeneous(f"{p}xA100", A100_80GB, Topology.fully_connected(p, NVLINK3))


def _uniform(layers: int = 8) -> list[LayerProfile]:
    """Equal layers: 1 ms forward, 2 ms backward, 64 MiB of activations, 16 MiB of weights."""
    return uniform_profile(layers, 1e-3, 2e-3, 64 * MiB, 16 * MiB, 4 * MiB)


def ch08_gpipe_schedule() -> Figure:
    """GPipe on 4 stages with 1 and 8 micro-batches: the bubble shrinks as M grows."""
    fig, axes = plt.subplots(2, 1, figsize=(9, 4.2), sharex=False)
    for ax, m in zip(axes, (1, 8), strict=True):
        spans = timeline(gpipe(4, m), 1.0, 2.0)
        draw_schedule(ax, spans, title=f"K = 4 stages, M = {m}: bubble "
                                       f"{bubble_fraction(4, m):.0%} of the time")
        ax.set_xlabel("time (forward = 1 unit, backward = 2)")
    fig.tight_layout()
    return fig


def ch08_bubble() -> Figure:
    """Bubble fraction against micro-batches: the closed form (K−1)/(M+K−1) and the
    simulated pipeline on NVLink-connected A100s."""
    ms = [1, 2, 4, 8, 16, 32]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for k in (2, 4, 8):
        ax.plot(ms, [bubble_fraction(k, m) for m in ms], "-", color=f"C{k // 4}",
                label=f"K = {k}: (K−1)/(M+K−1)")
        sim = [simulate_pipeline(_a100s(k), _uniform(k), [1] * k, m, trace=False)
               .bubble_fraction for m in ms]
        ax.plot(ms, sim, "o", color=f"C{k // 4}", ms=4)
    ax.plot([], [], "ko", ms=4, label="simulated (with communication)")
    log2_ticks(ax, ms)
    ax.set(xlabel="micro-batches M", ylabel="idle share of the step",
           title="GPipe's bubble: M ≥ 4K keeps it under about 20 %")
    ax.legend(fontsize=8)
    return fig


def ch08_checkpointing() -> Figure:
    """Peak activation memory per stage and step time with and without re-materialisation."""
    modes = ("never", "except_last", "always")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    width = 0.25
    for k, mode in enumerate(modes):
        r = simulate_pipeline(_a100s(4), _uniform(8), [2] * 4, 8, "gpipe", mode, trace=False)
        left.bar(np.arange(4) + (k - 1) * width, [b / 2**30 for b in r.peak_activation_bytes],
                 width, label=mode)
        right.bar(k, r.step_time_s * 1e3, color=f"C{k}")
    left.set_xticks(range(4), [f"stage {s}" for s in range(4)])
    left.set(ylabel="peak activations (GiB)", title="memory: checkpointing keeps inputs only")
    left.legend(fontsize=8, title="checkpoint")
    right.set_xticks(range(3), list(modes))
    right.set(ylabel="step (ms)", title="time: the forward runs again in backward")
    fig.suptitle("GPipe, 4 stages × 2 layers, M = 8 (simulated)")
    fig.tight_layout()
    return fig


def ch09_clock_cycles() -> Figure:
    """torchgpipe's clock_cycles(m=4, n=3): which (micro-batch, partition) runs at each tick."""
    m, n = 4, 3
    fig, ax = plt.subplots(figsize=(6.4, 2.4))
    for tick, pairs in enumerate(clock_cycles(m, n)):
        for i, j in pairs:
            ax.add_patch(Rectangle((tick, j - 0.4), 0.95, 0.8, color=plt.cm.tab10(i)))
            ax.text(tick + 0.47, j, f"F{i}", ha="center", va="center", fontsize=8)
    ax.set(xlim=(0, m + n - 1), ylim=(n - 0.5, -0.5), xlabel="clock tick k",
           title="clock_cycles(4, 3): at tick k, micro-batch i on partition k − i")
    ax.set_yticks(range(n), [f"partition {j}" for j in range(n)])
    ax.set_xticks(np.arange(m + n - 1) + 0.47, [str(k) for k in range(m + n - 1)])
    return fig


def _in_flight(spans: list[list[tuple[float, float, Action]]], rank: int,
               times: np.ndarray) -> np.ndarray:
    """Micro-batches whose forward has run and whose backward has not, on ``rank``."""
    count = np.zeros_like(times)
    for start, end, a in spans[rank]:
        sign = 1 if a.kind == "F" else -1
        count += sign * (times >= (start if sign > 0 else end))
    return count


def ch09_gpipe_vs_1f1b() -> Figure:
    """GPipe against 1F1B on 4 stages, 8 micro-batches: the same bubble, but 1F1B keeps at
    most p activations in flight on stage 0 instead of all m."""
    fig, axes = plt.subplots(3, 1, figsize=(9, 6.0), gridspec_kw={"height_ratios": [2, 2, 1.4]})
    times = np.linspace(0, 30, 600)
    for ax, (name, schedule) in zip(axes[:2], (("GPipe", gpipe(4, 8)),
                                           ("1F1B", one_f_one_b(4, 8))), strict=True):
        spans = timeline(schedule, 1.0, 2.0)
        draw_schedule(ax, spans, title=name)
        axes[2].plot(times, _in_flight(spans, 0, times), label=f"{name}, stage 0")
    axes[2].set(xlabel="time (forward = 1 unit, backward = 2)", ylabel="activations\nheld")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    return fig


UNEVEN = [LayerProfile(f"block{i}", f, 2 * f, int(a * MiB), int(w * MiB))
          for i, (f, a, w) in enumerate([(0.2e-3, 8, 1), (1.6e-3, 64, 16), (0.8e-3, 32, 8),
                                         (1.2e-3, 48, 12), (0.3e-3, 8, 2), (1.4e-3, 56, 14),
                                         (0.6e-3, 24, 6), (0.9e-3, 40, 10)])]
"""An uneven model: blocks of different widths (times s, activations and weights MiB)."""


def ch09_balance() -> Figure:
    """Stage compute for three balances of an uneven model, and the simulated 1F1B step."""
    stages = 3
    even = [3, 3, 2]
    balances = {"equal layers": even, "by time": balance_by_time(UNEVEN, stages),
                "by size": balance_by_size(UNEVEN, stages)}
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    for k, (name, balance) in enumerate(balances.items()):
        r = simulate_pipeline(_a100s(stages), UNEVEN, balance, 8, "1f1b", trace=False)
        left.bar(np.arange(stages) + (k - 1) * 0.25,
                 [(c.forward_s + c.backward_s) * 1e3 for c in r.stages], 0.25,
                 label=f"{name} {list(balance)}")
        right.bar(k, r.step_time_s * 1e3, color=f"C{k}")
    left.set_xticks(range(stages), [f"stage {s}" for s in range(stages)])
    left.set(ylabel="F + B per micro-batch (ms)", title="the slowest stage sets the pace")
    left.legend(fontsize=7)
    right.set_xticks(range(3), list(balances))
    right.set(ylabel="step (ms)", title="1F1B, M = 8 (simulated)")
    fig.tight_layout()
    return fig


def _versions_labels(p: int, m: int, versions: list[dict[int, int]]) -> list[list[str]]:
    return [[f"{a.microbatch}/{versions[r][a.microbatch]}" if a.kind == "F" else
             str(a.microbatch) for a in row] for r, row in enumerate(one_f_one_b(p, m))]


def ch10_pipedream_schedule() -> Figure:
    """PipeDream's asynchronous 1F1B with weight stashing, 4 stages, 10 inputs: no flush;
    each forward labelled input/weight version."""
    p, m = 4, 10
    plan = pipedream_async(p, m)
    spans = timeline(plan.schedule, 1.0, 2.0)
    fig, ax = plt.subplots(figsize=(11, 2.6))
    draw_schedule(ax, spans, _versions_labels(p, m, plan.version),
                  title="asynchronous 1F1B: forward labels input/weight version")
    ax.set_xlabel("time (forward = 1 unit, backward = 2)")
    return fig


def ch10_one_f_one_b() -> Figure:
    """1F1B's three phases on 4 stages: start-up, steady state (one forward, one backward),
    and the drain."""
    spans = timeline(one_f_one_b(4, 8), 1.0, 2.0)
    fig, ax = plt.subplots(figsize=(9, 2.6))
    draw_schedule(ax, spans, title="1F1B, 4 stages, 8 micro-batches "
                                   "(shaded: stage 0's steady state)")
    ax.axvspan(spans[0][3][0], spans[0][-4][1], color="0.92", zorder=0)
    ax.set_xlabel("time (forward = 1 unit, backward = 2)")
    return fig


VGG16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def vgg16_profile(batch: int = 32, flops_per_s: float = A100_80GB.flops_per_s
                  ) -> list[LayerProfile]:
    """VGG-16 as layer profiles from its FLOPs and tensor sizes (fp32, one micro-batch):
    convolutions with little weight and much compute, then fully connected layers holding
    most of the weights."""
    layers: list[LayerProfile] = []
    hw, cin = 224, 3
    for k, c in enumerate(VGG16):
        if c == "M":
            continue
        assert isinstance(c, int)
        pooled = k + 1 < len(VGG16) and VGG16[k + 1] == "M"
        flops = 2 * 9 * hw * hw * cin * c * batch
        out_hw = hw // 2 if pooled else hw
        layers.append(LayerProfile(f"conv{len(layers) + 1}", flops / flops_per_s,
                                   2 * flops / flops_per_s, hw * hw * c * batch * 4,
                                   9 * cin * c * 4, out_hw * out_hw * c * batch * 4))
        hw, cin = out_hw, c
    for k, (fan_in, fan_out) in enumerate([(25088, 4096), (4096, 4096), (4096, 1000)]):
        flops = 2 * fan_in * fan_out * batch
        layers.append(LayerProfile(f"fc{k + 1}", flops / flops_per_s, 2 * flops / flops_per_s,
                                   fan_out * batch * 4, fan_in * fan_out * 4))
    return layers


def ch10_planner() -> Figure:
    """PipeDream's planner on VGG-16, 8 GPUs: time per input of its plan against pure data
    parallelism and a straight pipeline, as the network gets faster."""
    vgg = vgg16_profile()
    networks = {"10 GbE": 10e9 / 8, "25 Gb/s": 25e9 / 8, "100 Gb/s": 100e9 / 8,
                "NVLink": 300e9}
    rows = []
    for bw in networks.values():
        plan = plan_pipedream(vgg, 8, bw, 5e-6)
        dp = plan_time(vgg, [len(vgg)], [8], bw, 5e-6)
        pp = plan_time(vgg, balance_by_time(vgg, 8), [1] * 8, bw, 5e-6)
        rows.append((plan.time_per_input_s, dp, pp))
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    x = np.arange(len(networks))
    for k, label in enumerate(("PipeDream plan", "data parallel", "straight pipeline")):
        ax.bar(x + (k - 1) * 0.27, [r[k] * 1e3 for r in rows], 0.27, label=label)
    ax.set_xticks(x, list(networks))
    ax.set_yscale("log")
    ax.set(xlabel="network", ylabel="time per input (ms)", title="VGG-16 on 8 GPUs")
    ax.legend(fontsize=8)
    return fig


def _version_grid(ax: Axes, versions: list[dict[int, int]], held: list[int],
                  title: str) -> None:
    grid = np.array([[row[i] for i in sorted(row)] for row in versions])
    ax.imshow(grid, cmap="YlGnBu", aspect="auto")
    for (r, i), v in np.ndenumerate(grid):
        ax.text(i, r, str(v), ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(versions)),
                  [f"stage {r} (holds {h})" for r, h in enumerate(held)])
    ax.set(title=title, xlabel="micro-batch")


def ch11_weight_versions() -> Figure:
    """The weight version each micro-batch's forward uses on each stage: weight stashing,
    vertical sync and PipeDream-2BW."""
    p, m = 4, 12
    fig, axes = plt.subplots(3, 1, figsize=(8, 6.4))
    for ax, (title, plan) in zip(axes, (
            ("weight stashing", pipedream_async(p, m)),
            ("vertical sync", pipedream_async(p, m, vertical_sync=True)),
            ("PipeDream-2BW, batch of 4", pipedream_2bw(p, m, batch=p))), strict=True):
        _version_grid(ax, plan.version, plan.stashed, title)
    fig.tight_layout()
    return fig


def ch11_weight_memory() -> Figure:
    """Weight memory per stage for VGG-16 on 4 A100s: flush (1 version), stashing (p − r),
    vertical sync (p), 2BW (2)."""
    p, m = 4, 12
    vgg = vgg16_profile()
    balance = balance_by_time(vgg, p)
    cluster = Cluster.homogeneous("4xA100", A100_80GB,
                                  Topology.fully_connected(p, Link(5e-6, 300e9, "fair")))
    runs = {"flush (1F1B)": simulate_pipeline(cluster, vgg, balance, m, "1f1b", trace=False),
            "stashing": simulate_pipeline(cluster, vgg, balance, m, "pipedream", trace=False),
            "2BW": simulate_pipeline(cluster, vgg, balance, m, "pipedream_2bw", batch=p,
                                     trace=False)}
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    width = 0.2
    for k, (name, r) in enumerate(runs.items()):
        ax.bar(np.arange(p) + k * width, [b / MiB for b in r.weight_bytes], width,
               label=f"{name} {r.weight_versions}")
    held = pipedream_async(p, m, vertical_sync=True).stashed
    ax.bar(np.arange(p) + 3 * width,
           [n * b / MiB for n, b in zip(held, runs["stashing"].parameter_bytes, strict=True)],
           width, label=f"vertical sync {held}")
    ax.set_xticks(np.arange(p) + 1.5 * width, [f"stage {r}\n{balance[r]} layers"
                                               for r in range(p)])
    ax.set_yscale("log")
    ax.set(ylabel="weight memory (MiB, log scale)", title=f"VGG-16, balance by time {balance}")
    ax.legend(fontsize=7, title="versions per stage", title_fontsize=7)
    return fig


def ch11_runtime_timeline() -> Figure:
    """The runtime engine's warm-up, steady state and drain: PipeDream on 4 A100s (NVLink),
    VGG-16 balanced by time, 8 inputs, simulated with its sends and receives."""
    p = 4
    vgg = vgg16_profile()
    run = simulate_pipeline(_a100s(p), vgg, balance_by_time(vgg, p), 8, "pipedream")
    return plot_timelines(run.trace, title="PipeDream, VGG-16 on 4 A100s, 8 inputs "
                                           "(rows: stages)")


FIGURES: Registry = {
    "ch08-gpipe-schedule": (8, ch08_gpipe_schedule),
    "ch08-bubble": (8, ch08_bubble),
    "ch08-checkpointing": (8, ch08_checkpointing),
    "ch09-clock-cycles": (9, ch09_clock_cycles),
    "ch09-gpipe-vs-1f1b": (9, ch09_gpipe_vs_1f1b),
    "ch09-balance": (9, ch09_balance),
    "ch10-pipedream-schedule": (10, ch10_pipedream_schedule),
    "ch10-one-f-one-b": (10, ch10_one_f_one_b),
    "ch10-planner": (10, ch10_planner),
    "ch11-weight-versions": (11, ch11_weight_versions),
    "ch11-weight-memory": (11, ch11_weight_memory),
    "ch11-runtime-timeline": (11, ch11_runtime_timeline),
}
"""This module's figures by file name."""
