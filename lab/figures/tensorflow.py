"""Figures of chapters 15–16: TensorFlow's distributed runtime, drawn from a graph of ops.

The graphs are plain data (:mod:`lab.figures.tf_graph`), built here for two examples: a model's
variables sharded over the ``ps`` job with one tower per worker (chapter 15), and one training
step of an 8-layer MLP under several placements (chapter 16). Schematic figures draw the data
structures (a ClusterSpec, the calls of a step, a partitioned graph); quantitative ones play the
partitions on the ``ethernet-10g`` preset with :func:`simulator.core.run_spmd` and set them beside
the chapters' closed forms. Seconds and bytes throughout; no calibration, no measurement.
"""

from __future__ import annotations

from collections.abc import Callable

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from lab.figures.canvas import MiB, Registry
from lab.figures.tf_graph import (
    Op,
    Step,
    alpha_beta,
    device,
    partition,
    prune,
    ranks,
    simulate,
    task_of,
)

# --- the chapters' example: an MLP of L layers, forward, backward and update -----------------

BATCH, WIDTH = 64, 2048
ACT_BYTES = BATCH * WIDTH * 4            # one activation or its gradient, fp32: 512 KiB
WEIGHT_BYTES = WIDTH * WIDTH * 4         # one layer's weight matrix, fp32: 16 MiB
FORWARD_S, BACKWARD_S, UPDATE_S = 5e-3, 10e-3, 1e-3  # per layer, s (≈100 GFLOP/s)


def mlp(layers: int, layer_device: Callable[[int], str],
        var_device: Callable[[int], str] | None = None, train: bool = True) -> list[Op]:
    """The graph of one step of an MLP: weights ``w{i}``, forward ``layer{i}``, ``loss``;
    with ``train`` the backward ``dx{i}``/``dw{i}`` and the update ``apply{i}``, each placed
    on ``var_device(i)`` (the layer's own device when ``None``)."""
    var_dev = var_device or layer_device
    g = [Op("x", (), ACT_BYTES, 0.0, layer_device(0))]
    for i in range(layers):
        g.append(Op(f"w{i}", (), WEIGHT_BYTES, 0.0, var_dev(i)))
        prev = g[-2].name if i == 0 else f"layer{i - 1}"
        g.append(Op(f"layer{i}", (prev, f"w{i}"), ACT_BYTES, FORWARD_S, layer_device(i)))
    g.append(Op("loss", (f"layer{layers - 1}",), 4, 0.0, layer_device(layers - 1)))
    if not train:
        return g
    upstream = "loss"
    for i in reversed(range(layers)):
        below = "x" if i == 0 else f"layer{i - 1}"
        if i > 0:  # the input's gradient first: it is what the layer below waits for
            g.append(Op(f"dx{i}", (upstream, f"w{i}"), ACT_BYTES, BACKWARD_S / 2,
                        layer_device(i)))
        g.append(Op(f"dw{i}", (upstream, below), WEIGHT_BYTES, BACKWARD_S / 2, layer_device(i)))
        g.append(Op(f"apply{i}", (f"w{i}", f"dw{i}"), 0, UPDATE_S, var_dev(i)))
        upstream = f"dx{i}"
    return g


def split(layers: int, tasks: int) -> Callable[[int], str]:
    """Contiguous layers per worker task: layer i on task ⌊i·tasks/layers⌋."""
    return lambda i: device("worker", i * tasks // layers)


def on_ps0(layer: int) -> str:
    """Every variable on the first ps task, whatever the layer."""
    return device("ps", 0)


def workers(n: int, ps: int = 0) -> dict[str, list[str]]:
    """A ClusterSpec with ``ps`` parameter-server tasks and ``n`` worker tasks."""
    spec = {"ps": [f"ps{i}.example:2222" for i in range(ps)]} if ps else {}
    spec["worker"] = [f"worker{i}.example:2222" for i in range(n)]
    return spec


# --- chapter 15 ------------------------------------------------------------------------------

DEVICES_15 = {"ps": [("CPU", 0)], "worker": [("CPU", 0), ("GPU", 0), ("GPU", 1)]}


def ch15_cluster() -> Figure:
    """The ClusterSpec of two ps and three worker tasks: one server per task, its services
    and the full names of its devices."""
    fig, ax = plt.subplots(figsize=(10.5, 3.9))
    for row, (job, addresses) in enumerate(workers(3, 2).items()):
        y = 1.0 - row * 1.15
        ax.text(-0.2, y + 0.45, f'job "{job}"', ha="right", va="center", fontsize=10,
                weight="bold")
        for task, address in enumerate(addresses):
            x = task * 4.0
            ax.add_patch(Rectangle((x, y), 3.8, 0.95, fill=False, lw=1.2))
            ax.text(x + 0.08, y + 0.86, f"task {task}: {address}", fontsize=7.5, va="top",
                    weight="bold")
            ax.text(x + 0.08, y + 0.66, "server: master + worker service", fontsize=6.5,
                    va="top", color="tab:blue")
            for k, (kind, index) in enumerate(DEVICES_15[job]):
                ax.text(x + 0.08, y + 0.46 - 0.15 * k, device(job, task, kind, index),
                        fontsize=6, va="top", family="monospace")
    ax.set(xlim=(-2.0, 12.0), ylim=(-0.3, 2.05),
           title="ClusterSpec {ps: 2 tasks, worker: 3 tasks}: one server per task")
    ax.axis("off")
    return fig


TASKS_15 = ["worker 0", "worker 1", "ps 0"]
MESSAGES_15 = ([("client", "master", "CreateSession(graph)"), ("master", "client", "handle"),
                ("client", "master", "RunStep(feeds, fetches)")]
               + [("master", t, "RegisterGraph(partition)") for t in TASKS_15]
               + [("master", t, "RunGraph(step 1)") for t in TASKS_15]
               + [("worker 1", "ps 0", "RecvTensor(key of w)"), ("ps 0", "worker 1", "tensor w"),
                  ("worker 0", "worker 1", "RecvTensor(key of h)"),
                  ("worker 1", "worker 0", "tensor h")]
               + [(t, "master", "RunGraph done") for t in TASKS_15]
               + [("master", "client", "fetched tensors")])
"""One graph's first step: the calls between the services (RecvTensor goes receiver → sender;
the bytes come back in its answer)."""


def ch15_messages() -> Figure:
    """Message sequence of one step: client, master, two workers and a ps task."""
    lanes = ["client", "master", "worker 0", "worker 1", "ps 0"]
    x = {name: i for i, name in enumerate(lanes)}
    fig, ax = plt.subplots(figsize=(8.5, 5.4))
    n = len(MESSAGES_15)
    for name in lanes:
        ax.plot([x[name]] * 2, [0.5, n + 0.5], color="gray", lw=0.8)
        ax.text(x[name], 0.1, name, ha="center", weight="bold")
    for t, (src, dst, label) in enumerate(MESSAGES_15, start=1):
        colour = "tab:orange" if label.startswith(("RecvTensor", "tensor ")) else "tab:blue"
        ax.annotate("", (x[dst], t), (x[src], t),
                    arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.1})
        ax.text((x[src] + x[dst]) / 2, t - 0.12, label, ha="center", fontsize=7)
    ax.set(ylim=(n + 0.8, -0.3), xlim=(-0.6, len(lanes) - 0.4),
           title="one step: control calls (blue) and tensors through the rendezvous (orange)")
    ax.axis("off")
    return fig


PSI_BYTES = 40_000_000     # 10 M fp32 parameters
STEP_COMPUTE_S = 50e-3     # one worker's forward + backward, s


def ps_graph(n_workers: int, n_ps: int) -> list[Op]:
    """In-graph replication: variables sharded over ``n_ps`` ps tasks, one tower per worker
    that reads every shard and returns a gradient per shard, summed and applied on the ps."""
    shard = PSI_BYTES // n_ps
    g = [Op(f"w{s}", (), shard, 0.0, device("ps", s)) for s in range(n_ps)]
    for j in range(n_workers):
        g.append(Op(f"tower{j}", tuple(f"w{s}" for s in range(n_ps)), 0, STEP_COMPUTE_S,
                    device("worker", j)))
        g += [Op(f"g{j}_{s}", (f"tower{j}",), shard, 0.0, device("worker", j))
              for s in range(n_ps)]
    for s in range(n_ps):
        g.append(Op(f"apply{s}", (f"w{s}", *(f"g{j}_{s}" for j in range(n_workers))), 0,
                    0.0, device("ps", s)))
    return g


def ch15_ps_tasks() -> Figure:
    """Step time of the ps-graph against the worker job's size, for 1, 2 and 4 ps tasks."""
    _, beta = alpha_beta()
    ws = [1, 2, 4, 6, 8]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for n_ps, marker in ((1, "o"), (2, "s"), (4, "^")):
        sim = [simulate(ps_graph(w, n_ps), workers(w, n_ps), "ethernet-10g") for w in ws]
        ax.plot(ws, [t * 1e3 for t in sim], marker, label=f"S = {n_ps} ps tasks, simulated")
        ax.plot(ws, [(STEP_COMPUTE_S + 2 * max(w / n_ps, 1) * PSI_BYTES * beta) * 1e3
                     for w in ws],
                "-", color=ax.lines[-1].get_color(), lw=0.8)
    ax.axhline(STEP_COMPUTE_S * 1e3, color="gray", ls=":", label="compute alone")
    ax.set(xlabel="W, tasks in job worker", ylabel="step (ms)",
           title="M = 40 MB of variables on the ps job, 10 Gb/s (lines: c + 2Mβ·max(W/S, 1))")
    ax.legend(fontsize=7)
    return fig


# --- chapter 16 ------------------------------------------------------------------------------

def _rows(programs: dict[int, list[Step]]) -> dict[tuple[int, int], int]:
    """A row per step for drawing: below the previous step of its task, and a Recv below its
    Send, so that time reads downwards across the partitions."""
    row = {(r, i): i for r, steps in programs.items() for i in range(len(steps))}
    sends = {s[4]: (r, i) for r, steps in programs.items() for i, s in enumerate(steps)
             if s[0] == "send"}
    for _ in range(len(row)):  # relax until no Recv sits above its Send
        for (r, i), y in row.items():
            recv = programs[r][i][0] == "recv"
            row[(r, i)] = max(y, row.get((r, i - 1), -1) + 1,
                              row[sends[programs[r][i][4]]] + 1 if recv else 0)
    return row


ARROW = {"arrowstyle": "->", "shrinkA": 9, "shrinkB": 9, "lw": 0.6}


def ch16_partitions() -> Figure:
    """A 3-layer forward graph pruned to ``loss``, placed on two workers, partitioned: each
    cut edge becomes a Send in the producer's partition and a Recv in the consumer's."""
    graph = mlp(3, split(3, 2), train=False)
    graph.append(Op("accuracy", ("layer2",), 4, 0.0, device("worker", 1)))
    kept = prune(graph, ["loss"])
    programs, pairs = partition(kept, ranks(workers(2)))
    rows = _rows(programs)
    fig, ax = plt.subplots(figsize=(8.0, 4.8))
    at: dict[tuple[int, str], tuple[float, int]] = {}  # (rank, tensor) → where it is made
    sent: dict[int, tuple[float, int]] = {}  # tag → where its Send is
    for (rank, i), y in rows.items():
        kind, name, _, _, tag, _ = programs[rank][i]
        xy = (rank * 4.0 + {"compute": 0.0, "send": 1.6, "recv": -1.2}[kind], y)
        face = {"compute": "white", "send": "#fdd0a2", "recv": "#c6dbef"}[kind]
        ax.text(*xy, name if kind == "compute" else f"{kind.capitalize()}({name})",
                ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round", "fc": face, "ec": "black", "lw": 0.6})
        if kind == "send":
            sent[tag] = xy
            ax.annotate("", xy, at[(rank, name)], arrowprops=ARROW)
        else:
            at[(rank, name)] = xy
    for op in kept:
        for name in op.inputs:
            rank = task_of(op.device)[1]
            ax.annotate("", at[(rank, op.name)], at[(rank, name)],
                        arrowprops={**ARROW, "color": "gray"})
    for p in pairs:
        ax.annotate("", at[(p.dst, p.key.split(";")[3][:-2])], sent[p.tag],
                    arrowprops={**ARROW, "ls": "--", "color": "tab:red", "lw": 1.0})
    bottom = max(rows.values()) + 1
    ax.text(4.0, bottom, "accuracy: pruned", ha="center", fontsize=8, color="gray",
            bbox={"boxstyle": "round", "fc": "white", "ec": "gray", "ls": ":"})
    for rank in programs:
        ax.text(rank * 4.0 + 0.2, -1.1, device("worker", rank), ha="center", fontsize=7,
                family="monospace", weight="bold")
    ax.text(2.4, bottom + 1.2, "key: " + pairs[0].key, ha="center", fontsize=6.5,
            family="monospace", color="tab:red")
    ax.set(xlim=(-1.8, 6.4), ylim=(bottom + 1.6, -1.6),
           title="fetch loss: prune, place, partition (dashed: a Send/Recv pair)")
    ax.axis("off")
    return fig


LAYERS = 8


def placements() -> dict[str, tuple[list[Op], dict[str, list[str]]]]:
    """The 8-layer MLP's training step under five placements: graph and ClusterSpec."""
    return {
        "one task": (mlp(LAYERS, split(LAYERS, 1)), workers(1)),
        "2 tasks,\ncontiguous": (mlp(LAYERS, split(LAYERS, 2)), workers(2)),
        "4 tasks,\ncontiguous": (mlp(LAYERS, split(LAYERS, 4)), workers(4)),
        "2 tasks,\nalternating": (mlp(LAYERS, lambda i: device("worker", i % 2)), workers(2)),
        "weights on ps,\n1 worker": (mlp(LAYERS, split(LAYERS, 1), on_ps0), workers(1, 1)),
    }


def ch16_bytes_by_placement() -> Figure:
    """Bytes the Send/Recv pairs carry per step, and their α-β time, for five placements."""
    alpha, beta = alpha_beta()
    labels, nbytes, times, counts = [], [], [], []
    for label, (graph, spec) in placements().items():
        _, pairs = partition(graph, ranks(spec))
        labels.append(label)
        nbytes.append(sum(p.nbytes for p in pairs))
        times.append(sum(alpha + p.nbytes * beta for p in pairs))
        counts.append(len(pairs))
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    bars = ax.bar(labels, [b / MiB if b else float("nan") for b in nbytes], color="tab:orange")
    for bar, n, t, b in zip(bars, counts, times, nbytes, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, max(b / MiB, 1e-3) * 1.15,
                f"{n} pairs\n{t * 1e3:.2f} ms", ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set(ylabel="MiB through Send/Recv per step", ylim=(5e-4, 2e3),
           title="8-layer MLP (512 KiB activations, 16 MiB weights): α + nβ per pair, 10 Gb/s")
    return fig


def step_closed_form(tasks: int, alpha_s: float, beta_s_per_B: float) -> float:
    """The 8-layer MLP's step split over ``tasks`` worker tasks (each running its partition in
    order), s: T(1) − (k − 1)(B/2 + U − 2α − 2aβ), with T(1) = L(F + B + U) − B/2. Each cut
    costs two Send/Recv pairs (activation down, gradient back) and lets one layer's weight
    gradient and update above it overlap the backward below it."""
    one = LAYERS * (FORWARD_S + BACKWARD_S + UPDATE_S) - BACKWARD_S / 2
    pair = alpha_s + ACT_BYTES * beta_s_per_B
    return one - (tasks - 1) * (BACKWARD_S / 2 + UPDATE_S - 2 * pair)


def ch16_step_vs_tasks() -> Figure:
    """Step time of the 8-layer MLP split over k worker tasks, simulated against
    :func:`step_closed_form`; and with every weight on one ps task."""
    alpha, beta = alpha_beta()
    ks = [1, 2, 4, 8]
    sim = [simulate(mlp(LAYERS, split(LAYERS, k)), workers(k), "ethernet-10g") for k in ks]
    on_ps = [simulate(mlp(LAYERS, split(LAYERS, k), on_ps0), workers(k, 1), "ethernet-10g")
             for k in ks]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(ks, [step_closed_form(k, alpha, beta) * 1e3 for k in ks], "-",
            label="closed form, weights with their layers")
    ax.plot(ks, [t * 1e3 for t in sim], "o", label="simulated, weights with their layers")
    ax.plot(ks, [t * 1e3 for t in on_ps], "s--", label="simulated, all weights on one ps task")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set(xlabel="worker tasks k (8 layers split contiguously)", ylabel="step (ms)",
           ylim=(0, None), title="8-layer MLP, 10 Gb/s: where the variables live matters most")
    ax.legend(fontsize=7, loc="lower left")
    return fig


FIGURES: Registry = {
    "ch15-cluster": (15, ch15_cluster),
    "ch15-messages": (15, ch15_messages),
    "ch15-ps-tasks": (15, ch15_ps_tasks),
    "ch16-partitions": (16, ch16_partitions),
    "ch16-bytes-by-placement": (16, ch16_bytes_by_placement),
    "ch16-step-vs-tasks": (16, ch16_step_vs_tasks),
}
"""This module's figures by file name."""
