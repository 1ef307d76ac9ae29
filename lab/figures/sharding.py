"""Figures of chapters 20 and 21: FSDP's step, overlap, peak memory and traffic, and context
parallelism's ring timeline, causal balance, traffic and ring-against-Ulysses step time.

Every figure is computed from the simulated twins, :mod:`simulator.fsdp` and
:mod:`simulator.context_parallel`, on the data-sheet DGX A100 preset (textbook tier: no
calibration, no measurement). Compute times are workload models at a fixed achieved rate
(FSDP: ``6Ψ`` FLOPs per token split 1 : 2 between forward and backward, Kaplan et al. 2020,
§2.1; attention: :func:`~simulator.context_parallel.attention_flops` at the device's peak), so
every run draws the same picture.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lab.figures.canvas import GiB, Registry, log2_ticks
from simulator.context_parallel import (
    STEP_WORK,
    AttentionShape,
    StepCosts,
    ring_kinds,
    ring_step_flops,
    ring_traffic_bytes,
    simulate_context_parallel,
    ulysses_traffic_bytes,
)
from simulator.context_parallel import attention_flops as attention_flops_of
from simulator.core import preset
from simulator.core.engine import Trace
from simulator.core.hardware import A100_80GB, IB_HDR, NVLINK3, Cluster
from simulator.fsdp import FsdpConfig, held_bytes, simulate_fsdp_step, traffic_bytes
from simulator.zero import UnitCost

ACHIEVED_FLOPS = 150e12
"""FSDP's compute rate, FLOP/s: about half an A100's 312 TFLOP/s bf16 peak (chapter 20)."""

BF16 = FsdpConfig(param_itemsize=2, reduce_itemsize=2)
"""Chapter 20's defaults: resharding after forward, prefetching, bf16 gathers and reductions."""

LLAMA2_7B = 6_740_000_000
"""Parameters of the chapter's running example (Touvron et al. 2023)."""


def one_gpu_nodes(world: int) -> Cluster:
    """``world`` A100s, one per node, on HDR InfiniBand: every FSDP byte crosses the 25 GB/s
    NIC, as in a ring that spans nodes, with few enough ranks to simulate quickly."""
    return Cluster.dgx(world, A100_80GB, NVLINK3, IB_HDR, gpus_per_node=1)


def fsdp_units(params: int, count: int, tokens: int, output_bytes: int = 0) -> list[UnitCost]:
    """``count`` equal units of a ``params``-parameter model over ``tokens`` tokens per rank:
    forward ``2Ψ_u T / F``, backward twice that, at :data:`ACHIEVED_FLOPS` (update left out)."""
    size = params // count
    forward_s = 2 * size * tokens / ACHIEVED_FLOPS
    return [UnitCost(size, forward_s, 2 * forward_s, 0.0, output_bytes) for _ in range(count)]


def _busy(trace: Trace, rank: int, kinds: set[str]) -> list[tuple[float, float]]:
    """``rank``'s spans of ``kinds`` as (start, end) intervals, s, overlapping ones merged
    (spans that only touch stay apart, so back-to-back computations show as separate boxes)."""
    spans = sorted((s.start, s.end) for s in trace if s.rank == rank and s.kind in kinds)
    merged: list[tuple[float, float]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _draw_rows(ax: Axes, rows: Sequence[tuple[str, list[tuple[float, float]], str]],
               title: str) -> None:
    """One row per (label, intervals in s, colour), drawn in ms."""
    for y, (_, intervals, colour) in enumerate(rows):
        ax.broken_barh([(a * 1e3, (b - a) * 1e3) for a, b in intervals], (y - 0.35, 0.7),
                       facecolors=colour, edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(rows)), [label for label, _, _ in rows])
    ax.invert_yaxis()
    ax.set_title(title, fontsize=9)


def ch20_step_timeline() -> Figure:
    """One FSDP step of eight 200M-parameter units on four A100s in four nodes, 8192 tokens
    per rank: rank 0's compute and communication without and with prefetching."""
    cluster = one_gpu_nodes(4)
    units = fsdp_units(8 * 200_000_000, 8, 8192)
    fig, axes = plt.subplots(2, 1, figsize=(8, 3.2), sharex=True)
    for ax, prefetch in zip(axes, (False, True), strict=True):
        config = FsdpConfig(prefetch=prefetch, param_itemsize=2, reduce_itemsize=2)
        result = simulate_fsdp_step(cluster, units, config)
        rows = [("compute", _busy(result.trace, 0, {"compute"}), "tab:blue"),
                ("collectives", _busy(result.trace, 0, {"send", "recv", "reduce"}),
                 "tab:orange")]
        _draw_rows(ax, rows, f"{'with' if prefetch else 'without'} prefetching: step "
                             f"{result.makespan_s * 1e3:.0f} ms (rank 0)")
    axes[1].set_xlabel("time (ms)")
    fig.tight_layout()
    return fig


def ch20_overlap() -> Figure:
    """Step time against tokens per rank, 8 units of a 1.6B model on four A100s in four
    nodes (HDR), with and without prefetching, beside the compute alone."""
    cluster = one_gpu_nodes(4)
    tokens = [512, 1024, 2048, 4096, 8192, 16384]
    times: dict[str, list[float]] = {"without prefetching": [], "with prefetching": []}
    compute = []
    for t in tokens:
        units = fsdp_units(1_600_000_000, 8, t)
        compute.append(sum(u.forward_s + u.backward_s for u in units))
        for prefetch, key in ((False, "without prefetching"), (True, "with prefetching")):
            config = FsdpConfig(prefetch=prefetch, param_itemsize=2, reduce_itemsize=2)
            times[key].append(simulate_fsdp_step(cluster, units, config,
                                                 trace=False).makespan_s)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for (key, values), marker in zip(times.items(), "os", strict=True):
        ax.plot(tokens, np.array(values) / np.array(compute), marker + "-", label=key)
    ax.axhline(1.0, color="grey", linestyle=":", label="compute alone")
    ax.axvline(3 / 4 * ACHIEVED_FLOPS / IB_HDR.bandwidth_Bps, color="grey", linestyle="--",
               label="T* = (N−1)/N·(d_p/2)·F/B, B = 25 GB/s")
    log2_ticks(ax, tokens)
    ax.set(xlabel="tokens per rank per step", ylabel="step time ÷ compute time",
           title="FSDP, 1.6B parameters in 8 units, 4 A100 in 4 nodes, bf16 (simulated)")
    ax.legend(fontsize=7)
    return fig


def ch20_peak_memory() -> Figure:
    """Peak memory of a rank against the number of units (same 1.6B model, 4 ranks, bf16
    gathers, fp32 shards, Adam; activations left out), for three configurations."""
    cluster = preset("a100", 4)
    params, counts = 1_600_000_000, [1, 2, 4, 8, 16, 32]
    configs = {"reshard + prefetch": BF16,
               "reshard, no prefetch": FsdpConfig(prefetch=False, param_itemsize=2,
                                                  reduce_itemsize=2),
               "no reshard + prefetch": FsdpConfig(reshard_after_forward=False,
                                                   param_itemsize=2, reduce_itemsize=2)}
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for (label, config), marker in zip(configs.items(), "os^", strict=True):
        peaks = [max(simulate_fsdp_step(cluster, fsdp_units(params, u, 1), config,
                                        trace=False).peak_memory_bytes) for u in counts]
        ax.plot(counts, np.array(peaks) / GiB, marker + "-", label=label)
    held = [held_bytes(fsdp_units(params, u, 1), 4, BF16) / GiB for u in counts]
    ax.plot(counts, held, "k:", label="held states 16Ψ/N (+ flat gradient buffer)")
    log2_ticks(ax, counts)
    ax.set(xlabel="units U", ylabel="peak memory per rank (GiB)",
           title="FSDP peak memory, 1.6B parameters, 4 ranks (simulated)")
    ax.legend(fontsize=7)
    return fig


def ch20_traffic() -> Figure:
    """Bytes each rank sends per step, 6.74B parameters in 33 units, by mixed-precision
    policy and resharding, against N."""
    worlds = [2, 4, 8, 16, 32, 64, 128, 256]
    units = fsdp_units(LLAMA2_7B, 33, 1)
    cases = {"fp32 params, fp32 reduce": (4, 4, True), "bf16 params, fp32 reduce": (2, 4, True),
             "bf16 params, bf16 reduce": (2, 2, True),
             "bf16 / bf16, no reshard after forward": (2, 2, False)}
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, (dp, dr, reshard) in cases.items():
        config = FsdpConfig(reshard_after_forward=reshard, param_itemsize=dp,
                            reduce_itemsize=dr)
        ax.plot(worlds, [traffic_bytes(units, n, config) / 1e9 for n in worlds], "o-",
                label=label)
    log2_ticks(ax, worlds)
    ax.set(xlabel="ranks N", ylabel="GB sent per rank per step", ylim=(0, None),
           title="FSDP traffic per rank, 6.74B parameters: (g·d_p + d_r)(N−1)/N·Ψ")
    ax.legend(fontsize=7)
    return fig


ATTENTION = AttentionShape(batch=1, heads=32, seq=16384, dim=128, causal=True, itemsize=2)
"""Chapter 21's attention layer: 32 heads of 128 features (h = 4096), bf16, causal."""


def attention_costs(shape: AttentionShape, p: int, scheme: str) -> StepCosts:
    """One rank's compute per ring step kind (or Ulysses' local attention over ``H/p`` heads
    of all tokens), at the A100's peak; the ring's ``Δ`` reads ``dO`` and ``O`` at memory
    bandwidth."""
    peak = A100_80GB.flops_per_s
    if scheme == "ulysses":
        fwd, bwd = attention_flops_of(shape.seq, shape.seq, shape)
        half = 0.5 if shape.causal else 1.0
        return StepCosts({"local": half * fwd / p / peak}, {"local": half * bwd / p / peak})
    kinds = ("diagonal", "earlier", "later") if shape.causal else ("full",)
    flops = {k: ring_step_flops(shape, p, k) for k in kinds}
    prologue = 2 * shape.shard_bytes(p) / A100_80GB.mem_bandwidth_Bps
    return StepCosts({k: f / peak for k, (f, _) in flops.items()},
                     {k: b / peak for k, (_, b) in flops.items()}, prologue)


def ch21_ring_timeline() -> Figure:
    """Ring attention, forward and backward, on four A100s of one node: 16K tokens causal
    (4096 per rank, zig-zag), each rank's compute and its transfers."""
    cluster, p = preset("a100", 4), 4
    result = simulate_context_parallel(cluster, "ring", ATTENTION,
                                       attention_costs(ATTENTION, p, "ring"))
    rows = []
    for r in range(p):
        rows.append((f"rank {r} compute", _busy(result.trace, r, {"compute"}), "tab:blue"))
        rows.append((f"rank {r} transfers", _busy(result.trace, r, {"send", "recv"}),
                     "tab:orange"))
    fig, ax = plt.subplots(figsize=(8, 3.4))
    _draw_rows(ax, rows, f"ring attention, S = 16384 causal, p = 4 A100 (NVSwitch): "
                         f"{result.makespan_s * 1e3:.1f} ms (simulated)")
    ax.set_xlabel("time (ms)")
    fig.tight_layout()
    return fig


def ch21_causal_balance() -> Figure:
    """Causal sub-blocks per rank, p = 8: contiguous (4r + 3) against zig-zag
    (:func:`ring_kinds` with :data:`STEP_WORK`)."""
    p = 8
    contiguous = [4 * r + 3 for r in range(p)]
    zigzag = [sum(STEP_WORK[k] for k in ring_kinds(r, p, True)) for r in range(p)]
    x = np.arange(p)
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.bar(x - 0.2, contiguous, 0.4, label="contiguous: 4r + 3")
    ax.bar(x + 0.2, zigzag, 0.4, label="zig-zag: 2p + 1")
    ax.axhline(4 * p - 1, color="tab:blue", linestyle="--", linewidth=0.8,
               label=f"contiguous step time in lockstep: 4p − 1 = {4 * p - 1}")
    ax.axhline(2 * p + 1, color="tab:orange", linestyle="--", linewidth=0.8,
               label=f"zig-zag step time: 2p + 1 = {2 * p + 1}")
    ax.set_xticks(x, [f"rank {r}" for r in range(p)])
    ax.set(ylabel="c × c sub-blocks computed",
           title="causal attention's work per rank, p = 8, 2p chunks")
    ax.legend(fontsize=7)
    return fig


def ch21_traffic() -> Figure:
    """Bytes a rank sends per attention layer, forward and backward, against p at 16384
    tokens per rank (h = 4096, bf16)."""
    ps = [2, 4, 8, 16, 32, 64]
    ring, ulysses = [], []
    for p in ps:
        shape = AttentionShape(1, 64, 16384 * p, 64, causal=True, itemsize=2)
        ring.append(ring_traffic_bytes(shape, p) / 1e9)
        ulysses.append(ulysses_traffic_bytes(shape, p) / 1e9)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(ps, ring, "o-", label="ring: (3p − 2)·M, M = 2A")
    ax.plot(ps, ulysses, "s-", label="Ulysses: 8A·(p − 1)/p")
    log2_ticks(ax, ps)
    ax.set(xlabel="context-parallel ranks p", ylabel="GB sent per rank per layer",
           title="S/p = 16384 tokens per rank, h = 4096, bf16")
    ax.legend(fontsize=7)
    return fig


def ch21_ring_vs_ulysses() -> Figure:
    """One causal attention layer, forward and backward, on 8 A100s (NVSwitch): ring and
    Ulysses step time against the sequence length, beside the compute alone."""
    cluster, p = preset("a100", 8), 8
    seqs = [2048, 4096, 8192, 16384, 32768, 65536]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    compute = []
    for seq in seqs:
        costs = attention_costs(AttentionShape(1, 32, seq, 128, True, 2), p, "ulysses")
        compute.append(costs.forward_s["local"] + costs.backward_s["local"])
    for scheme, marker in (("ring", "o"), ("ulysses", "s")):
        times = []
        for seq in seqs:
            shape = AttentionShape(1, 32, seq, 128, True, 2)
            times.append(simulate_context_parallel(cluster, scheme, shape,
                                                   attention_costs(shape, p, scheme),
                                                   trace=False).makespan_s)
        ax.plot(seqs, np.array(times) / np.array(compute), marker + "-", label=scheme)
    ax.axhline(1.0, color="grey", linestyle=":", label="attention compute alone")
    ax.axvline(p * 2 * A100_80GB.flops_per_s / NVLINK3.bandwidth_Bps, color="grey",
               linestyle="--", label="ring's minimum, causal: S/p = d_b·F/B")
    log2_ticks(ax, seqs)
    ax.set(xlabel="sequence length S", ylabel="step time ÷ compute time",
           title="one causal attention layer, p = 8 A100 (NVSwitch), bf16 (simulated)")
    ax.legend(fontsize=7)
    return fig


FIGURES: Registry = {
    "ch20-step-timeline": (20, ch20_step_timeline),
    "ch20-overlap": (20, ch20_overlap),
    "ch20-peak-memory": (20, ch20_peak_memory),
    "ch20-traffic": (20, ch20_traffic),
    "ch21-ring-timeline": (21, ch21_ring_timeline),
    "ch21-causal-balance": (21, ch21_causal_balance),
    "ch21-traffic": (21, ch21_traffic),
    "ch21-ring-vs-ulysses": (21, ch21_ring_vs_ulysses),
}
