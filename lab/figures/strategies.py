"""Figures of chapters 17–19: TensorFlow's distribution strategies, drawn from the simulator.

Chapter 17 draws the two contexts of a strategy and its distributed values (schematic), and
prices TF's three cross-device ops on eight GPUs of one ``a100`` node with
:func:`simulator.core.run_spmd`. Chapter 18 plays one ``MirroredStrategy`` step and one
``MultiWorkerMirroredStrategy`` step with :mod:`simulator.tf_distribute.mirrored` on a fixed
textbook profile, and weighs loss scaling by the global batch. Chapter 19 runs the
``ClusterCoordinator``'s closure queue with :mod:`simulator.tf_distribute.ps_strategy`:
a straggler, a lost worker, and the ps tasks as a shared server. Everything is fixed in the
code (data-sheet presets, no calibration, no measurement). Units: seconds, bytes.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from lab.figures.canvas import MiB, Registry, log2_ticks
from simulator.collectives.all_reduce import hierarchical_all_reduce, ring_all_reduce
from simulator.collectives.broadcast import linear_broadcast
from simulator.collectives.reduce import linear_reduce
from simulator.core import preset
from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.data_parallel import TableProfile
from simulator.tf_distribute import HostRates, simulate_mirrored, simulate_multi_worker
from simulator.tf_distribute.ps_strategy import (
    Channel,
    ClosureCost,
    Request,
    closure_time_s,
    simulate_closures,
)

# --- chapter 17 ------------------------------------------------------------------------------


def _box(ax: Axes, x: float, y: float, w: float, h: float, text: str,
         colour: str = "white", size: float = 8) -> None:
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", fc=colour,
                                ec="black", lw=0.9))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)


def ch17_contexts() -> Figure:
    """The cross-replica context (the user's program) and the replica context (one thread per
    replica inside ``strategy.run``), with a merge call that crosses back for one moment."""
    fig, ax = plt.subplots(figsize=(10, 4.4))
    _box(ax, 0.0, 3.4, 10.0, 0.7, "cross-replica context: the program, strategy.scope(), "
         "strategy.run(step_fn, args), strategy.reduce(SUM, per_replica)", "#dde8f5")
    for r in range(4):
        x = 0.3 + r * 2.45
        _box(ax, x, 0.4, 2.1, 2.4, "", "#fdf1dc")
        ax.text(x + 1.05, 2.6, f"replica {r}  (device {r})", ha="center", fontsize=8,
                weight="bold")
        for k, line in enumerate(["forward on its slice", "loss / global batch", "gradients",
                                  "all_reduce  →  merge_call", "apply on its copy"]):
            ax.text(x + 0.1, 2.25 - 0.4 * k, line, fontsize=7.5, va="top",
                    color="tab:red" if "merge" in line else "black")
        ax.annotate("", (x + 1.05, 2.8), (x + 1.05, 3.4),
                    arrowprops={"arrowstyle": "->", "lw": 0.9})
    ax.plot([0.3, 9.65], [1.03, 1.03], ls="--", color="tab:red", lw=1)
    ax.text(5.0, 0.15, "merge call: every replica thread stops here; the last to arrive runs "
            "merge_fn once (cross-replica), then all go on", ha="center", fontsize=7.5,
            color="tab:red")
    ax.set(xlim=(-0.1, 10.1), ylim=(0, 4.2),
           title="two contexts: strategy.run enters one thread per replica")
    ax.axis("off")
    return fig


def ch17_values() -> Figure:
    """PerReplica, MirroredVariable and SyncOnReadVariable on four devices: which copies
    differ, what a write does and what a read costs."""
    fig, ax = plt.subplots(figsize=(10, 4.2))
    rows = [("PerReplica (a batch slice, a loss)", ["x₀", "x₁", "x₂", "x₃"], "#fdf1dc",
             "different values; strategy.reduce makes one"),
            ("MirroredVariable  (ON_WRITE)", ["w", "w", "w", "w"], "#dde8f5",
             "equal copies; a write reaches all, a read is local"),
            ("SyncOnReadVariable  (ON_READ, SUM)", ["c₀", "c₁", "c₂", "c₃"], "#e3f2e1",
             "each replica writes its own; a read outside sums them")]
    for i, (name, cells, colour, note) in enumerate(rows):
        y = 2.8 - i * 1.25
        ax.text(-0.1, y + 0.35, name, ha="right", va="center", fontsize=8.5, weight="bold")
        for d, cell in enumerate(cells):
            _box(ax, d * 1.3, y, 1.1, 0.7, cell, colour, 11)
        ax.text(5.3, y + 0.35, note, va="center", fontsize=8)
    for d in range(4):
        ax.text(d * 1.3 + 0.55, 3.75, f"device {d}", ha="center", fontsize=8)
    ax.set(xlim=(-4.3, 9.6), ylim=(0.1, 4.0), title="distributed values on four replicas")
    ax.axis("off")
    return fig


def reduction_to_one_device(comm: SimComm, nbytes: int) -> SimGen:
    """TF's ``ReductionToOneDevice`` as an SPMD program: every buffer to device 0, added
    there one after another, the sum sent back to each device."""
    yield from linear_reduce(comm, nbytes, 0)
    yield from linear_broadcast(comm, nbytes, 0)


def hierarchical_copy(comm: SimComm, nbytes: int) -> SimGen:
    """TF's ``HierarchicalCopyAllReduce`` as an SPMD program: reduce inside two groups of
    four devices, all-reduce between the two leaders, copy back inside each group."""
    yield from hierarchical_all_reduce(comm, nbytes, ranks_per_node=4)


CROSS_DEVICE_OPS = {
    "ReductionToOneDevice": reduction_to_one_device,
    "NcclAllReduce (ring)": ring_all_reduce,
    "HierarchicalCopyAllReduce (2 groups of 4)": hierarchical_copy,
}
"""The three cross-device ops of chapter 17, on the simulator's collectives."""

GPUS = 8
SIZES = [2**k for k in range(16, 31, 2)]  # 64 KiB … 1 GiB


def cross_device_s(name: str, nbytes: int, gpus: int = GPUS) -> float:
    """Time of cross-device op ``name`` on ``nbytes`` per replica, one ``a100`` node, s."""
    op = CROSS_DEVICE_OPS[name]
    return run_spmd(preset("a100", gpus), lambda comm: op(comm, nbytes), trace=False).makespan_s


def ch17_cross_device_ops() -> Figure:
    """Time and algorithmic bandwidth of the three ops against the gradient's size."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for name in CROSS_DEVICE_OPS:
        times = [cross_device_s(name, n) for n in SIZES]
        left.plot(SIZES, times, marker="o", label=name)
        right.plot(SIZES, [n / t / 1e9 for n, t in zip(SIZES, times, strict=True)],
                   marker="o", label=name)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(SIZES, [f"{n // MiB} MiB" if n >= MiB else f"{n // 1024} KiB"
                              for n in SIZES], fontsize=7)
        ax.set_xlabel("gradient bytes per replica")
    left.set(yscale="log", ylabel="time (s)", title=f"{GPUS} GPUs, one a100 node (NVSwitch)")
    right.set(ylabel="n / time (GB/s)", title="algorithmic bandwidth")
    left.legend(fontsize=7)
    return fig


# --- chapter 18 ------------------------------------------------------------------------------

PROFILE = TableProfile(batches=(32, 256), forward=(2e-3, 16e-3), backward=(4e-3, 32e-3),
                       loss=(0.1e-3, 0.8e-3), step=3e-3)
"""A textbook compute profile of one replica (s): linear in the rows, 0.5 ms per 8 rows
forward, twice that backward, an SGD update of 3 ms."""
PARAM_BYTES = 25 * 10**6  # 6.25 M float32 parameters
RATES = HostRates(memcpy_Bps=10e9, reduce_Bps=5e9, cores=16)
"""A 16-core host that copies at 10 GB/s and adds at 5 GB/s."""
GLOBAL_BATCH = 256


def ch18_mirrored_step() -> Figure:
    """One MirroredStrategy step of a 256-row global batch on 1–8 replica threads: compute,
    the cross-device op (run by one thread), update; for the three ops."""
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), sharey=True)
    replicas = [1, 2, 4, 8]
    for ax, op in zip(axes, ["ring", "one_device", "hierarchical"], strict=True):
        preds = [simulate_mirrored(PROFILE, PARAM_BYTES, GLOBAL_BATCH, k, RATES, op)
                 for k in replicas]
        xs = range(len(replicas))
        bottom = [0.0] * len(replicas)
        for part, colour in [("compute_s", "tab:blue"), ("all_reduce_s", "tab:orange"),
                             ("update_s", "tab:green")]:
            h = [getattr(p, part) * 1e3 for p in preds]
            ax.bar(xs, h, bottom=bottom, color=colour, label=part.removesuffix("_s"))
            bottom = [b + v for b, v in zip(bottom, h, strict=True)]
        ax.set_xticks(list(xs), [str(k) for k in replicas])
        ax.set(xlabel="replicas", title=f"cross_device_ops: {op}")
    axes[0].set_ylabel("step (ms)")
    axes[0].legend(fontsize=7)
    fig.suptitle("MirroredStrategy on one 16-core host, 25 MB of gradients, batch 256",
                 fontsize=9)
    return fig


def ch18_loss_scaling() -> Figure:
    """Weight of each example in the gradient when 7 rows are split 3/2/2 over three replicas:
    scaled by the global batch (every row 1/7) against a per-replica mean averaged over
    replicas (rows of the larger slice count less)."""
    slices = [3, 2, 2]
    k, batch = len(slices), sum(slices)
    right = [1 / batch] * batch
    wrong = [1 / (c * k) for c in slices for _ in range(c)]
    fig, ax = plt.subplots(figsize=(8, 3.4))
    xs = range(batch)
    ax.bar([x - 0.2 for x in xs], right, width=0.4, label="loss · 1/global batch (correct)")
    ax.bar([x + 0.2 for x in xs], wrong, width=0.4, label="mean per replica, then MEAN")
    owner = [r for r, c in enumerate(slices) for _ in range(c)]
    ax.set_xticks(list(xs), [f"row {x}\nreplica {owner[x]}" for x in xs], fontsize=7)
    ax.set(ylabel="weight in the gradient",
           title="7 rows on 3 replicas: how much each example counts")
    ax.legend(fontsize=7)
    return fig


def ch18_multi_worker() -> Figure:
    """MultiWorkerMirroredStrategy on ``ethernet-10g``, 64 rows per worker: the simulated step
    (compute, then one ring all-reduce, then update) against the same step with the
    all-reduce hidden behind the backward as DDP's buckets allow at best."""
    workers = [2, 4, 8, 16]
    mwms, ddp, ring = [], [], []
    for p in workers:
        pred = simulate_multi_worker(preset("ethernet-10g", p), PROFILE, PARAM_BYTES, 64 * p,
                                     cores=math.inf)
        backward = PROFILE.backward_s(64)
        mwms.append(pred.step_s)
        ring.append(pred.all_reduce_s)
        ddp.append(pred.step_s - min(pred.all_reduce_s, backward))
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    ax.plot(workers, mwms, marker="o", label="MWMS: compute, then all-reduce")
    ax.plot(workers, ddp, marker="s", label="all-reduce overlapped with backward (DDP bound)")
    ax.plot(workers, ring, marker="^", ls=":", label="the ring all-reduce alone")
    log2_ticks(ax, workers)
    ax.set(xlabel="workers", ylabel="step (s)", ylim=(0, None),
           title="25 MB of gradients on 10 Gb/s Ethernet, 64 rows per worker")
    ax.legend(fontsize=7)
    return fig


# --- chapter 19 ------------------------------------------------------------------------------

ETHERNET = Channel(latency_s=20e-6, bandwidth_Bps=10e9 / 8)
"""The ``ethernet-10g`` preset's link as a point-to-point channel."""


def closure_cost(num_ps: int = 2, model_bytes: int = 8 * 10**6, compute_s: float = 40e-3
                 ) -> ClosureCost:
    """One training closure: pull the model's ``model_bytes`` in equal shards from ``num_ps``
    ps tasks, compute, push a gradient of the same size."""
    share = model_bytes // num_ps
    return ClosureCost(dispatch_bytes=2048,
                       pulls=tuple(Request(p, 64, share) for p in range(num_ps)),
                       compute_s=compute_s,
                       pushes=tuple(Request(p, share, 64) for p in range(num_ps)))


def ch19_closures() -> Figure:
    """24 closures on 4 workers, worker 3 three times slower, worker 1 lost at 0.2 s: who ran
    what, and the closure that was run twice."""
    result = simulate_closures(24, 4, closure_cost(), ETHERNET, num_ps=2,
                               slowdown=[1, 1, 1, 3], failures={1: 0.2})
    fig, ax = plt.subplots(figsize=(10, 3.2))
    for closure, w, start, end in result.runs:
        ax.barh(w, end - start, left=start, height=0.7, color="tab:blue", ec="black", lw=0.4)
        ax.text((start + end) / 2, w, str(closure), ha="center", va="center", fontsize=7,
                color="white")
    for w, lost, t in result.lost:
        began = max((end for _, v, _, end in result.runs if v == w and end <= t), default=0.0)
        ax.barh(w, t - began, left=began, height=0.7, color="white", ec="tab:red",
                hatch="//", lw=0.6)
        ax.plot([t], [w], marker="X", color="tab:red", ms=10)
        ax.text(t + 0.005, w - 0.42, f"lost; closure {lost} back to the queue",
                fontsize=7, color="tab:red")
    ax.set_yticks(range(4), ["worker 0", "worker 1", "worker 2", "worker 3 (×3 slower)"])
    ax.invert_yaxis()
    ax.set(xlabel="time (s)", title=f"ClusterCoordinator: 24 closures, makespan "
           f"{result.makespan_s:.3f} s")
    return fig


def synchronous_s(closures: int, per_closure_s: list[float]) -> float:
    """The same work in lock-step rounds of one closure per worker: every round waits for its
    slowest worker, s."""
    return math.ceil(closures / len(per_closure_s)) * max(per_closure_s)


def ch19_stragglers() -> Figure:
    """Makespan of 64 closures on 8 workers as one worker slows down: the coordinator's queue
    against lock-step rounds, and the ideal of perfect load balance."""
    slow = [1, 1.5, 2, 3, 4, 6, 8]
    queue, sync, ideal = [], [], []
    for s in slow:
        slowdown = [1.0] * 7 + [s]
        per = [closure_time_s(closure_cost(), ETHERNET, f) for f in slowdown]
        queue.append(simulate_closures(64, 8, closure_cost(), ETHERNET, num_ps=2,
                                       slowdown=slowdown).makespan_s)
        sync.append(synchronous_s(64, per))
        ideal.append(64 / sum(1 / t for t in per))
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    ax.plot(slow, sync, marker="s", label="lock-step rounds (synchronous)")
    ax.plot(slow, queue, marker="o", label="closure queue (ClusterCoordinator)")
    ax.plot(slow, ideal, ls=":", label="work / total rate (perfect balance)")
    ax.set(xlabel="slowdown of one worker of 8", ylabel="time for 64 closures (s)",
           ylim=(0, None), title="a straggler: pulled work against lock-step rounds")
    ax.legend(fontsize=7)
    return fig


PS_NIC = Channel(latency_s=ETHERNET.latency_s, bandwidth_Bps=math.inf)
"""The channel when a request's bytes are charged to its ps task instead (``ps_busy_s``): the
latency alone, so that the bytes are counted once, at the link they queue for."""


def ch19_ps_tasks() -> Figure:
    """Makespan of 64 closures on 8 workers against the number of ps tasks the variables are
    sharded over, when a ps task serves one request at a time, holding its own 10 Gb/s link
    for the request's bytes; dotted, the ps bound ``K·2P/(S·B)``."""
    shards = [1, 2, 4, 8]
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for model_mb in (8, 32):
        times = []
        for s in shards:
            cost = closure_cost(s, model_mb * 10**6)
            busy = cost.pulls[0].answered_bytes / ETHERNET.bandwidth_Bps
            times.append(simulate_closures(64, 8, cost, PS_NIC, num_ps=s,
                                           ps_busy_s=busy).makespan_s)
        ax.plot(shards, times, marker="o", label=f"{model_mb} MB of variables")
    log2_ticks(ax, shards)
    for model_mb, colour in ((8, "tab:blue"), (32, "tab:orange")):
        ps_bound = [64 * 2 * model_mb * 10**6 / ETHERNET.bandwidth_Bps / s for s in shards]
        ax.plot(shards, ps_bound, ls=":", color=colour, lw=0.8)
    ax.set(xlabel="ps tasks (one shard of every variable each)", ylabel="64 closures (s)",
           ylim=(0, None), title="8 workers: the ps tasks as shared servers")
    ax.legend(fontsize=7)
    return fig


FIGURES: Registry = {
    "ch17-contexts": (17, ch17_contexts),
    "ch17-values": (17, ch17_values),
    "ch17-cross-device-ops": (17, ch17_cross_device_ops),
    "ch18-mirrored-step": (18, ch18_mirrored_step),
    "ch18-loss-scaling": (18, ch18_loss_scaling),
    "ch18-multi-worker": (18, ch18_multi_worker),
    "ch19-closures": (19, ch19_closures),
    "ch19-stragglers": (19, ch19_stragglers),
    "ch19-ps-tasks": (19, ch19_ps_tasks),
}
"""The figures of chapters 17–19: file name stem → (chapter, drawing function)."""
