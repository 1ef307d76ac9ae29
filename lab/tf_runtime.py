"""TensorFlow's distributed runtime predicted and measured, side by side (book chapter 16).

* :class:`SkipMLP` — the chapter's model: a stack of linear layers with a skip connection
  from the first layer's output to the last layer's input, and its loss inside the graph, so
  that a step fetches one scalar;
* :func:`graph_spec` — the model placed over ``tasks`` tasks, contiguous runs of layers each
  (:class:`backends.tf_runtime.measure.GraphSpec`): the skip connection and the targets cross
  from task 0 to the last task;
* :func:`sim_partitions` — the real partitions with each node's one-process profile
  (:func:`backends.tf_runtime.measure.profile_nodes`), as the simulated twin's
  :class:`simulator.tf_runtime.SimPartition` s;
* :func:`predict_step` — :func:`simulator.tf_runtime.simulate_graph_step` on this machine's
  calibrated cluster in a tier; :func:`measure_step` — real steps over processes.

Seconds and bytes throughout.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import torch
from torch import nn

from backends.tf_runtime.graph import NodeDef
from backends.tf_runtime.measure import GraphSpec, NodeCost, profile_nodes, timed_steps
from backends.tf_runtime.partition import Partition, RecvOp, SendOp, bytes_sent
from simulator.core.calibration import Calibration
from simulator.tf_runtime import SimOp, SimPartition, simulate_graph_step, step_bytes

WIDTHS = (256, 512, 512, 512, 256)
"""The twin's model: four linear layers (0.8 M parameters), so up to four tasks."""


class SkipMLP(nn.Module):
    """Linear layers ``widths[0] → … → widths[-1]`` with ReLU between, the first layer's output
    added to the last layer's input, and the mean squared error against ``y`` as output."""

    def __init__(self, widths: Sequence[int]) -> None:
        super().__init__()
        if len(widths) < 3 or widths[1] != widths[-2]:
            raise ValueError(f"a skip connection needs widths[1] == widths[-2], got {widths}")
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The loss of one batch."""
        h = torch.relu(self.layers[0](x))
        skip = h
        for layer in self.layers[1:-1]:
            h = torch.relu(layer(h))
        return nn.functional.mse_loss(self.layers[-1](h + skip), y)


def graph_spec(tasks: int, batch: int, widths: Sequence[int] = WIDTHS) -> GraphSpec:
    """:class:`SkipMLP` on ``batch`` rows over ``tasks`` tasks: task ``t`` holds layers
    ``⌊t·n/tasks⌉ …`` (contiguous runs, ``n`` layers), the skip connection's sum with the last
    layer: the first layer's output goes to the next task and to the last."""
    n = len(widths) - 1
    if not 1 <= tasks <= n:
        raise ValueError(f"{n} layers can go on 1 to {n} tasks, not {tasks}")
    cuts = [round(t * n / tasks) for t in range(tasks + 1)]
    by_prefix = {f"layers.{i}": t for t in range(tasks) for i in range(cuts[t], cuts[t + 1])}
    return GraphSpec(partial(SkipMLP, tuple(widths)), ((batch, widths[0]), (batch, widths[-1])),
                     tasks, by_prefix=by_prefix, by_name={"add": tasks - 1})


def sim_partitions(partitions: Sequence[Partition], costs: Mapping[str, NodeCost]
                   ) -> list[SimPartition]:
    """The simulated twin's view of real partitions: each node's profiled costs, each Send and
    Recv's peer, bytes and tag, each partition's updates and its RunGraph tensors."""
    out = []
    for p in partitions:
        ops = []
        for op in p.ops:
            if isinstance(op, (SendOp, RecvOp)):
                ops.append(SimOp("send" if isinstance(op, SendOp) else "recv", op.name,
                                 peer=op.peer, nbytes=op.nbytes, tag=op.tag,
                                 grad=op.needs_grad))
            else:
                c = costs[op.name]
                ops.append(SimOp("node", op.name, c.forward_s, c.backward_s))
        nodes = [op for op in p.ops if isinstance(op, NodeDef)]
        update = sum(costs[n.name].update_s for n in nodes)
        feeds = sum(n.nbytes for n in nodes if n.op == "placeholder")
        fetches = sum(n.nbytes for n in nodes if n.name in p.fetches)
        out.append(SimPartition(tuple(ops), update, feeds, fetches))
    return out


def predict_step(spec: GraphSpec, calibration: Calibration, models: Sequence[str],
                 repeats: int = 10) -> dict[str, Any]:
    """The predicted step of ``spec`` in each tier of ``models`` (``{"predicted": {model:
    s}}``), from the one-process profile and this machine's calibrated cluster (a free network
    where the host tier has no calibration, :func:`lab.pipeline.prediction.local_cluster`)."""
    from lab.pipeline.prediction import local_cluster

    parts = sim_partitions(spec.partitions(), profile_nodes(spec, repeats))
    seconds = {m: simulate_graph_step(local_cluster(spec.tasks, calibration, model=m)[0],
                                      parts).makespan_s for m in models}
    return {"predicted": seconds, "bytes": sum(step_bytes(parts))}


def measure_step(spec: GraphSpec, repeats: int = 10) -> dict[str, Any]:
    """Median, p10 and p90 seconds of real training steps of ``spec`` over processes."""
    samples = sorted(timed_steps(spec, repeats))
    n = len(samples)
    return {"median_s": statistics.median(samples), "p10_s": samples[int(0.1 * n)],
            "p90_s": samples[min(n - 1, int(0.9 * n))],
            "bytes": sum(bytes_sent(spec.partitions()))}
