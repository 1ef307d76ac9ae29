"""Figures of chapters 12–14: Megatron's t × p × d step and its communication, the RPC
split model's timeline, and ZeRO's memory and communication per rank.

Megatron runs on the DGX A100 preset with the GPT presets of Narayanan et al. (2021); ZeRO's
numbers are its closed forms (:mod:`simulator.zero`) and ring collectives timed on the preset.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from lab.figures.canvas import GiB, Registry, draw_schedule, log2_ticks
from lab.plots import plot_timelines
from simulator.core import preset
from simulator.core.hardware import A100_80GB
from simulator.pipeline import interleaved_1f1b, one_f_one_b, timeline
from simulator.rpc import StageCost, message_count, simulate_split_step, split_step_cost
from simulator.tensor_parallel import Grid, MegatronConfig, simulate_megatron
from simulator.transformer import pipeline_elements, tensor_parallel_elements_per_layer
from simulator.transformer import preset as gpt
from simulator.zero import communication_bytes, max_parameters, model_state_bytes, simulate_zero


def ch12_step_breakdown() -> Figure:
    """GPT 18B on 64 A100s, batch 128: where one iteration goes for several t × p × d."""
    model, cluster = gpt("gpt-18b"), preset("a100", 64)
    grids = [Grid(8, 8, 1), Grid(8, 4, 2), Grid(8, 2, 4), Grid(4, 4, 4), Grid(2, 8, 4),
             Grid(1, 8, 8)]
    parts: dict[str, list[float]] = {"compute": [], "bubble": [], "data-parallel all-reduce": [],
                                     "optimizer": []}
    labels = []
    for g in grids:
        r = simulate_megatron(cluster, MegatronConfig(model, g, 128, 1, recompute="full"))
        labels.append(f"t{g.t} p{g.p} d{g.d}")
        parts["compute"].append(r.pipeline_time_s * (1 - r.bubble_fraction))
        parts["bubble"].append(r.pipeline_time_s * r.bubble_fraction)
        parts["data-parallel all-reduce"].append(max(r.data_parallel_s))
        parts["optimizer"].append(max(r.update_s))
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    bottom = np.zeros(len(grids))
    for k, values in parts.items():
        ax.bar(labels, values, bottom=bottom, label=k)
        bottom += np.array(values)
    ax.set(ylabel="iteration (s)", title="GPT 18B, 64 A100 (8 per node), batch 128, "
                                         "full recomputation (simulated)")
    ax.legend(fontsize=7)
    return fig


def ch12_comm_per_layer() -> Figure:
    """Bytes one GPU sends per layer and micro-batch: tensor parallelism's four all-reduces
    against a pipeline boundary's activation, GPT 18B, fp16, b = 1."""
    model = gpt("gpt-18b")
    ts = [1, 2, 4, 8, 16]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(ts, [tensor_parallel_elements_per_layer(model, 1, t) * 2 / 2**20 for t in ts],
            "o-", label="tensor parallel: 8·bsh·(t−1)/t per layer")
    ax.plot(ts, [tensor_parallel_elements_per_layer(model, 1, t, "full") * 2 / 2**20
                 for t in ts], "s--", label="… with full recomputation: 12·bsh·(t−1)/t")
    ax.plot(ts, [2 * pipeline_elements(model, 1, t) * 2 / 2**20 for t in ts], "^-",
            label="pipeline boundary, forward + backward (scatter/gather: 2bsh/t)")
    log2_ticks(ax, ts)
    ax.set(xlabel="tensor-parallel size t", ylabel="MiB sent per GPU",
           title="GPT 18B (h = 6144, s = 2048): why t stays inside a node")
    ax.legend(fontsize=7)
    return fig


def ch12_interleaved() -> Figure:
    """1F1B against interleaved 1F1B with two chunks per rank: the bubble halves."""
    fig, axes = plt.subplots(2, 1, figsize=(9, 4.4), sharex=True)
    plain = timeline(one_f_one_b(4, 8), 1.0, 2.0)
    inter = timeline(interleaved_1f1b(4, 8, 2), 0.5, 1.0)
    draw_schedule(axes[0], plain, title="1F1B, p = 4, m = 8")
    draw_schedule(axes[1], inter, title="interleaved 1F1B, v = 2 chunks per rank "
                                        "(light: chunk 1)")
    axes[1].set_xlabel("time (a whole stage's forward = 1 unit, backward = 2)")
    fig.tight_layout()
    return fig


def ch12_memory() -> Figure:
    """Memory per GPU of GPT-3 175B on 1024 A100s (t8 p16 d8) for each recomputation mode."""
    model, cluster = gpt("gpt3-175b"), preset("a100", 1024)
    cases = {"none": {"recompute": "none"}, "selective": {"recompute": "selective"},
             "selective +\nseq. parallel": {"recompute": "selective",
                                            "sequence_parallel": True},
             "full": {"recompute": "full"}}
    keys = ("parameters", "gradients", "optimizer_state", "activations")
    fig, ax = plt.subplots(figsize=(6.8, 3.6))
    bottom = np.zeros(len(cases))
    rows = [simulate_megatron(cluster, MegatronConfig(model, Grid(8, 16, 8), 1536, 1,
                                                      **options)).memory[0]  # type: ignore[arg-type]
            for options in cases.values()]
    for k in keys:
        values = np.array([row[k] / GiB for row in rows])
        ax.bar(list(cases), values, bottom=bottom, label=k.replace("_", " "))
        bottom += values
    ax.axhline(80, color="k", ls="--", lw=1)
    ax.set(ylabel="GiB on the first stage's GPU",
           title="GPT-3 175B, t8 p16 d8, micro-batch 1 (dashed: 80 GiB)")
    ax.legend(fontsize=7)
    return fig


RPC_STAGES = [StageCost(4e-3, 8e-3, 2e-3, 4 << 20, 8 << 20),
              StageCost(6e-3, 12e-3, 3e-3, 8 << 20, 1 << 20)]
"""Two stages of a split model: forward, backward and optimizer times (s), input and output
bytes."""


def ch13_rpc_timeline() -> Figure:
    """One training step of the RPC split model: driver and two workers, 10 Gb/s Ethernet."""
    result = simulate_split_step(preset("ethernet-10g", 3), RPC_STAGES)
    return plot_timelines(result.trace, title="RPC split model: rank 0 driver, "
                                              "ranks 1–2 stages")


def ch13_rpc_vs_stages() -> Figure:
    """Step time against the number of stages: the closed form and the simulation agree, and
    each stage adds its messages while only one worker computes at a time."""
    cluster = preset("ethernet-10g", 2)
    alpha = cluster.topology.path_latency_s(0, 1)
    beta = 1 / cluster.topology.path_bandwidth_Bps(0, 1)
    ks = [1, 2, 3, 4, 6, 8]
    total_f, total_b = 12e-3, 24e-3
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    sim, closed = [], []
    for k in ks:
        stages = [StageCost(total_f / k, total_b / k, 0.0, 4 << 20, 4 << 20)] * k
        sim.append(simulate_split_step(preset("ethernet-10g", k + 1), stages).makespan_s)
        closed.append(split_step_cost(stages, alpha, beta))
    ax.plot(ks, [t * 1e3 for t in closed], "-", label="closed form")
    ax.plot(ks, [t * 1e3 for t in sim], "o", label="simulated")
    ax.axhline((total_f + total_b) * 1e3, color="gray", ls=":", label="compute alone")
    ax.set(xlabel="stages k", ylabel="step (ms)",
           title="the same model split over k workers, 4 MiB activations, 10 Gb/s")
    ax.legend(fontsize=8)
    return fig


def ch13_messages() -> Figure:
    """Messages one step sends, by phase, as the model is split over more stages."""
    ks = [1, 2, 3, 4, 6, 8]
    phases = ("forward", "backward", "acknowledgements", "optimizer")
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    bottom = np.zeros(len(ks))
    for phase in phases:
        values = np.array([message_count(k)[phase] for k in ks], dtype=float)
        ax.bar([str(k) for k in ks], values, bottom=bottom, label=phase)
        bottom += values
    ax.set(xlabel="stages k", ylabel="messages per step", title="8k − 2 messages per step")
    ax.legend(fontsize=8)
    return fig


PSI = 7_500_000_000  # ZeRO paper's 7.5B-parameter example
WORLDS = [1, 4, 16, 64, 256, 1024]


def ch14_memory() -> Figure:
    """Model states per device at each ZeRO stage against N_d (7.5B parameters, mixed Adam)."""
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.2), sharey=True)
    for stage, ax in enumerate(axes):
        bottom = np.zeros(len(WORLDS))
        for part in ("parameters", "gradients", "optimizer"):
            values = np.array([getattr(model_state_bytes(PSI, stage, n), part) / 1e9
                               for n in WORLDS])
            ax.bar([str(n) for n in WORLDS], values, bottom=bottom, label=part)
            bottom += values
        ax.axhline(A100_80GB.memory_bytes / 1e9, color="k", ls="--", lw=0.8)
        ax.set_yscale("log")
        ax.set(title=f"stage {stage}", xlabel="data-parallel ranks $N_d$")
    axes[0].set_ylabel("GB per device")
    axes[0].legend(fontsize=7)
    fig.suptitle("ZeRO, 7.5B parameters: 16Ψ, 4Ψ+12Ψ/N_d, 2Ψ+14Ψ/N_d, 16Ψ/N_d "
                 "(dashed: an 80 GiB A100)")
    fig.tight_layout()
    return fig


def ch14_max_parameters() -> Figure:
    """The largest model whose states fit an 80 GiB A100, per stage, against N_d."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for stage in range(4):
        ax.plot(WORLDS, [max_parameters(A100_80GB.memory_bytes, stage, n) / 1e9
                         for n in WORLDS], "o-", label=f"stage {stage}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(xlabel="data-parallel ranks $N_d$", ylabel="parameters (billions)",
           title="what fits in 80 GiB (model states only)")
    ax.legend(fontsize=8)
    return fig


def ch14_communication() -> Figure:
    """Bytes each rank sends per step, and the time of those ring collectives on DGX A100
    nodes: stage 3 costs 1.5× the rest."""
    worlds = [8, 16, 32, 64]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    for stage in range(4):
        left.plot(worlds, [communication_bytes(PSI, stage, n) / PSI for n in worlds], "o-",
                  label=f"stage {stage}")
        right.plot(worlds, [simulate_zero(PSI, stage, n, cluster=preset("a100", n))
                            ["communication_time_s"] for n in worlds], "o-",
                   label=f"stage {stage}")
    log2_ticks(left, worlds)
    log2_ticks(right, worlds)
    left.set(xlabel="$N_d$", ylabel="bytes sent per rank / Ψ",
             title="volume (stages 0–2 coincide)")
    right.set(xlabel="$N_d$ (8 per node)", ylabel="time per step (s)",
              title="ring collectives on DGX A100, not overlapped")
    left.legend(fontsize=8)
    fig.tight_layout()
    return fig


FIGURES: Registry = {
    "ch12-step-breakdown": (12, ch12_step_breakdown),
    "ch12-comm-per-layer": (12, ch12_comm_per_layer),
    "ch12-interleaved": (12, ch12_interleaved),
    "ch12-memory": (12, ch12_memory),
    "ch13-rpc-timeline": (13, ch13_rpc_timeline),
    "ch13-rpc-vs-stages": (13, ch13_rpc_vs_stages),
    "ch13-messages": (13, ch13_messages),
    "ch14-memory": (14, ch14_memory),
    "ch14-max-parameters": (14, ch14_max_parameters),
    "ch14-communication": (14, ch14_communication),
}
"""This module's figures by file name."""
