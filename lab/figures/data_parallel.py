"""Figures of chapters 4–7: DataParallel's single-process iteration, DDP's buckets and
overlap, and Horovod's cycle and fusion buffer.

The clusters are the presets (PCIe or NVSwitch GPUs, 10 Gb/s Ethernet servers) and the
workloads are MLPs priced by their FLOPs, so every number is a data-sheet prediction.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from lab.figures.canvas import MiB, Registry, log2_ticks
from lab.plots import plot_timelines
from simulator.core import Cluster, Trace, preset
from simulator.core.hardware import A100_80GB, NVLINK3
from simulator.data_parallel import (
    PCIE4,
    PHASES,
    FlopProfile,
    Workload,
    ddp_step_cost,
    pcie_cluster,
    simulate_data_parallel,
)
from simulator.ddp import Workload as DDPWorkload
from simulator.ddp import assign_buckets, mlp_workload, predict_step
from simulator.horovod import (
    HorovodSettings,
    Response,
    fuse_responses,
    uniform_cycle_timeline,
)
from simulator.horovod import predict_step as predict_horovod

GPU = replace(A100_80GB, flops_per_s=19.5e12)  # FP32 without tensor cores, as PyTorch trains
BIG = (4096, 4096, 4096, 4096, 1000)
SERVER_MLP = (2048,) * 7  # 100 MB of fp32 gradients in 6 tensors of weights and 6 biases
SERVER_FLOPS = 200e9  # one server's CPU, FLOP/s


def _dp(p: int) -> tuple[Workload, FlopProfile, Cluster]:
    return Workload.for_mlp(BIG, 512), FlopProfile.for_mlp(BIG, GPU), pcie_cluster(p, GPU)


def ch04_dp_timeline() -> Figure:
    """A simulated DataParallel iteration on 4 PCIe GPUs, one row per device."""
    workload, profile, cluster = _dp(4)
    result = simulate_data_parallel(cluster, workload, profile, "concurrent")
    return plot_timelines(result.trace, title="DataParallel, 4 PCIe A100 (rows: devices)")


def ch04_dp_phases() -> Figure:
    """Where a DataParallel iteration goes, phase by phase, as GPUs are added."""
    workload, profile, _ = _dp(1)
    ps = [1, 2, 4, 8]
    phases = [simulate_data_parallel(pcie_cluster(p, GPU), workload, profile,
                                     "concurrent").returns[0] for p in ps]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    bottom = np.zeros(len(ps))
    for i, phase in enumerate(PHASES):
        values = np.array([ph[phase] * 1e3 for ph in phases])
        ax.bar([str(p) for p in ps], values, bottom=bottom, color=f"C{i}", label=phase)
        bottom += values
    ax.set(xlabel="GPUs", ylabel="iteration (ms)",
           title="DataParallel on PCIe A100s: compute shrinks, copies grow")
    ax.legend(fontsize=7, ncol=2)
    return fig


def ch04_dp_vs_ddp() -> Figure:
    """DataParallel (simulated) against DDP's ring all-reduce (closed form) as GPUs grow."""
    workload, profile, _ = _dp(1)
    ps = list(range(1, 9))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, name, link in zip(axes, ("PCIe", "NVSwitch"), (PCIE4, NVLINK3), strict=True):
        dp = [simulate_data_parallel(pcie_cluster(p, GPU) if name == "PCIe"
                                     else Cluster.dgx(p, GPU), workload, profile,
                                     "concurrent").makespan_s for p in ps]
        ddp = [ddp_step_cost(p, workload, profile, link.latency_s, 1 / link.bandwidth_Bps,
                             GPU.gamma_s_per_B) for p in ps]
        ax.plot(ps, [t * 1e3 for t in dp], "-o", ms=4, label="DataParallel (simulated)")
        ax.plot(ps, [t * 1e3 for t in ddp], "-s", ms=4, label="DDP, ring all-reduce")
        ax.set(title=f"{name}: one iteration", xlabel="GPUs", ylabel="iteration (ms)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _server(world: int) -> tuple[Cluster, DDPWorkload]:
    """``world`` CPU servers on 10 Gb/s Ethernet and the MLP they train."""
    return preset("ethernet-10g", world), mlp_workload(SERVER_MLP, 256, SERVER_FLOPS)


def ch05_buckets() -> Figure:
    """The Reducer's buckets for a small MLP: reverse registration order, a small first
    bucket, then buckets of at least the cap."""
    widths = (1024, 1024, 512, 512, 256, 10)
    sizes = [s for a, b in itertools.pairwise(widths) for s in (a * b * 4, b * 4)]
    names = [f"fc{i}.{w}" for i in range(len(widths) - 1) for w in ("weight", "bias")]
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 3.4), sharex=True)
    for ax, (cap, first) in zip(axes, ((MiB, MiB // 4), (2 * MiB, MiB // 2)), strict=True):
        left = 0.0
        for b, members in enumerate(assign_buckets(sizes, cap, first)):
            for i in members:
                ax.barh(0, sizes[i] / MiB, left=left, color=f"C{b}", edgecolor="black", lw=0.5)
                if sizes[i] > MiB / 8:
                    ax.text(left + sizes[i] / MiB / 2, 0, names[i], ha="center", va="center",
                            fontsize=6)
                left += sizes[i] / MiB
        ax.set(yticks=[], title=f"cap {cap / MiB:g} MiB, first bucket {first / MiB:g} MiB "
                               "(colour: bucket)")
    axes[-1].set_xlabel("MiB, in the order backward produces the gradients (last layer first)")
    fig.tight_layout()
    return fig


def ch05_overlap_timeline() -> Figure:
    """A simulated DDP step on 4 Ethernet servers: bucket all-reduces under backward."""
    cluster, workload = _server(4)
    result = predict_step(cluster, workload, 25 * MiB, MiB)
    trace = Trace(s for s in result.trace if s.rank < 2 and s.kind != "recv")
    return plot_timelines(trace, title=f"DDP step, 25 MiB buckets, p = 4 (ranks 0–1); exposed "
                                       f"{result.exposed_comm_s * 1e3:.0f} ms")


def ch05_strategies() -> Figure:
    """The paper's four refinements of gradient reduction, simulated on 8 Ethernet servers."""
    cluster, workload = _server(8)
    cases = {"per tensor,\nafter backward": (1, False), "one buffer,\nafter backward":
             (1024 * MiB, False), "per tensor,\nduring backward": (1, True),
             "25 MiB buckets,\nduring backward": (25 * MiB, True)}
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for i, (cap, overlap) in enumerate(cases.values()):
        r = predict_step(cluster, workload, cap, overlap=overlap)
        ax.bar(i, r.backward_end_s * 1e3, color="tab:green")
        ax.bar(i, (r.step_s - r.backward_end_s) * 1e3, bottom=r.backward_end_s * 1e3,
               color="tab:red")
    ax.set_xticks(range(len(cases)), list(cases), fontsize=7)
    ax.bar([0], [0], color="tab:green", label="forward + backward")
    ax.bar([0], [0], color="tab:red", label="after backward: exposed comm + step")
    ax.set(ylabel="step (ms)", title="p = 8, 10 Gb/s Ethernet, 100 MB of gradients")
    ax.legend(fontsize=7)
    return fig


def exposed_recurrence(b: float, n: float, backward_s: float, a: float, beta: float) -> float:
    """Chapter 6's model: K = ⌈N/b⌉ buckets ready at k·T_b/K, reduced one at a time in
    a + bβ' each; the exposed time f_K − T_b, s."""
    k = int(np.ceil(n / b))
    finish = 0.0
    for i in range(1, k + 1):
        size = min(b, n - (i - 1) * b)
        finish = max(i * backward_s / k, finish) + a + size * beta
    return finish - backward_s


def ch06_exposed_ucurve() -> Figure:
    """Exposed communication against the bucket size, ResNet-50's numbers (eq-ddp-exposed)."""
    n, tb, a, beta = 102.4e6, 0.2, 0.42e-3, 143.4e-3 / 102.4e6
    caps = [0.25, 0.5, 1, 2, 4, 8, 16, 25, 50, n / MiB]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.loglog(caps, [exposed_recurrence(c * MiB, n, tb, a, beta) * 1e3 for c in caps], "o-")
    best = a / (tb / n - beta)
    ax.axvline(best / MiB, color="gray", ls=":")
    ax.text(best / MiB, 0.6, f" b* = {best / MiB:.2f} MiB", fontsize=8)
    ax.axvline(25, color="tab:red", ls="--", lw=0.8)
    ax.text(25, 0.6, " 25 MiB\n default", fontsize=8, color="tab:red")
    ax.set(xlabel="bucket size b (MiB)", ylabel="exposed communication E (ms)",
           title="ResNet-50, p = 8, 10 Gb/s: steep below b*, linear above")
    ax.grid(True, which="major", alpha=0.3)
    return fig


def ch06_ucurve_simulated() -> Figure:
    """Simulated DDP step time against the bucket cap on Ethernet servers, p = 2 and 8."""
    caps = [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for world in (2, 8):
        cluster, workload = _server(world)
        steps = [predict_step(cluster, workload, int(c * MiB)).step_s * 1e3
                 for c in caps]
        ax.plot(caps, steps, "o-", ms=4, label=f"p = {world}")
    ax.axhline(workload.compute_s * 1e3, color="gray", ls=":", label="compute alone")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="bucket cap (MiB)", ylabel="predicted step (ms)",
           title="DDP on 10 Gb/s Ethernet servers: the U-curve of bucket sizes")
    ax.legend(fontsize=8)
    return fig


def ch06_overlap_vs_world() -> Figure:
    """Simulated DDP step with and without overlap as the world grows."""
    ws = [2, 4, 8, 16]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for overlap in (True, False):
        steps = []
        for w in ws:
            cluster, workload = _server(w)
            steps.append(predict_step(cluster, workload, 25 * MiB, MiB,
                                      overlap=overlap).step_s * 1e3)
        ax.plot(ws, steps, "o-", label="overlap (DDP)" if overlap else "all-reduce after backward")
    ax.axhline(workload.compute_s * 1e3, color="gray", ls=":", label="compute alone")
    log2_ticks(ax, ws)
    ax.set(xlabel="world size p", ylabel="predicted step (ms)",
           title="10 Gb/s Ethernet servers, default buckets")
    ax.legend(fontsize=8)
    return fig


def ch07_cycle_timeline() -> Figure:
    """The background thread's fused all-reduces during backward, cycle 1 ms and 25 ms
    (chapter 7's ResNet-50 numbers)."""
    n, tb, a, c0 = 102.4e6, 0.2, 0.42e-3, 0.09e-3
    beta = 143.4e-3 / n
    fig, axes = plt.subplots(2, 1, figsize=(8, 3.2), sharex=True)
    for ax, c_ms in zip(axes, (1, 25), strict=True):
        t = uniform_cycle_timeline(n, tb, a, beta, c_ms * 1e-3, c0, 64 * MiB, pop_delay_s=c0)
        ax.broken_barh([(s * 1e3, (e - s) * 1e3) for s, e, _ in t.all_reduces], (0, 1),
                       color="C1", edgecolor="white", linewidth=0.4, label="fused all-reduce")
        ax.vlines([s * 1e3 for s in t.cycle_starts_s], -0.3, 0, color="C0", lw=0.6,
                  label="cycle starts")
        ax.axvspan(0, tb * 1e3, color="0.9", zorder=0, label="backward")
        ax.set(yticks=[], title=f"cycle time {c_ms} ms: {t.cycles} cycles, exposed "
                                f"{t.exposed_s * 1e3:.1f} ms")
    axes[0].legend(fontsize=7, loc="upper left")
    axes[-1].set_xlabel("ms from the start of backward")
    fig.tight_layout()
    return fig


def ch07_fusion() -> Figure:
    """Fused all-reduces per step, and the simulated step, against the fusion threshold."""
    cluster, workload = _server(4)
    ready = [Response(f"t{i}", n) for i, n in enumerate(reversed(workload.param_sizes))]
    thresholds = [0, 1, 4, 16, 64, 128]
    counts = [len(fuse_responses(ready, int(t * MiB))) for t in thresholds]
    steps = [predict_horovod(cluster, workload, HorovodSettings(int(t * MiB), 1e-3))
             .step_s * 1e3 for t in thresholds]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    x = range(len(thresholds))
    ax.plot(x, steps, "o-", label="predicted step (ms), cycle 1 ms")
    ax.set_xticks(list(x), [f"{t:g}" for t in thresholds])
    ax.set(xlabel="fusion threshold (MiB)", ylabel="step (ms)",
           title="Horovod on 4 Ethernet servers, 100 MB of gradients")
    twin = ax.twinx()
    twin.bar(list(x), counts, alpha=0.25, color="tab:gray", label="fused all-reduces")
    twin.set_ylabel("all-reduces per step")
    ax.set_zorder(twin.get_zorder() + 1)
    ax.patch.set_visible(False)
    ax.legend(loc="upper right", fontsize=7)
    twin.legend(loc="upper center", fontsize=7)
    return fig


def ch07_horovod_vs_ddp() -> Figure:
    """Simulated Horovod (cycle 1 and 5 ms) against DDP as Ethernet servers are added."""
    ws = [2, 4, 8, 16]
    rows = []
    for w in ws:
        cluster, workload = _server(w)
        ddp = predict_step(cluster, workload, 25 * MiB, MiB).step_s
        hv = [predict_horovod(cluster, workload, HorovodSettings(128 * MiB, c * 1e-3)).step_s
              for c in (1, 5)]
        rows.append((ddp, *hv))
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for k, (label, style) in enumerate((("DDP (25 MiB buckets)", "o-"),
                                        ("Horovod, cycle 1 ms", "s-"),
                                        ("Horovod, cycle 5 ms", "^-"))):
        ax.plot(ws, [r[k] * 1e3 for r in rows], style, label=label)
    ax.axhline(workload.compute_s * 1e3, color="gray", ls=":", label="compute alone")
    log2_ticks(ax, ws)
    ax.set(xlabel="world size p", ylabel="predicted step (ms)",
           title="10 Gb/s Ethernet servers, server compute")
    ax.legend(fontsize=8)
    return fig


FIGURES: Registry = {
    "ch04-dp-timeline": (4, ch04_dp_timeline),
    "ch04-dp-phases": (4, ch04_dp_phases),
    "ch04-dp-vs-ddp": (4, ch04_dp_vs_ddp),
    "ch05-buckets": (5, ch05_buckets),
    "ch05-overlap-timeline": (5, ch05_overlap_timeline),
    "ch05-strategies": (5, ch05_strategies),
    "ch06-exposed-ucurve": (6, ch06_exposed_ucurve),
    "ch06-ucurve-simulated": (6, ch06_ucurve_simulated),
    "ch06-overlap-vs-world": (6, ch06_overlap_vs_world),
    "ch07-cycle-timeline": (7, ch07_cycle_timeline),
    "ch07-fusion": (7, ch07_fusion),
    "ch07-horovod-vs-ddp": (7, ch07_horovod_vs_ddp),
}
"""This module's figures by file name."""
