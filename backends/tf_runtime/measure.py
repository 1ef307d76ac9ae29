"""Timing the runtime: real steps over processes, and the one-process profile of every node.

Book chapter 16's lab. A :class:`GraphSpec` says how the master builds its graph — a model
factory (picklable: a module-level function or a ``functools.partial``), the feeds' shapes,
and which task each module path (or node) goes to — so that the very same graph is timed on
``tasks`` processes (:func:`timed_steps`: :func:`backends.tf_runtime.runtime.server` under
:func:`backends.launch.spawn`, rank 0 the master) and profiled on ONE process with one thread
(:func:`profile_nodes`: every node's forward, backward and SGD update, s), which is what the
simulated twin (:mod:`simulator.tf_runtime`) reads. A step is a training step: the forward
pass to the fetches, the backward pass seeded with ones, and an SGD update of every variable
where it lives.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from backends.launch import spawn
from backends.tf_runtime.cluster import ClusterSpec
from backends.tf_runtime.graph import GraphDef, capture, place, prune
from backends.tf_runtime.partition import Partition, partition
from backends.tf_runtime.rendezvous import LocalRendezvous
from backends.tf_runtime.runtime import MasterSession, Timings, run_partition, server

LR = 0.01
"""SGD learning rate of a timed step."""


@dataclass(frozen=True)
class GraphSpec:
    """A model, its feeds and its placement over ``tasks`` tasks of job ``worker``.

    Attributes:
        factory: builds the model (seeded by :meth:`build`).
        feed_shapes: one float32 feed per placeholder, in order.
        tasks: how many tasks (processes).
        by_prefix: module path prefix → task (:func:`~backends.tf_runtime.graph.place`).
        by_name: node name → task.
        seed: the seed of the parameters and the feeds.
    """

    factory: Callable[[], nn.Module]
    feed_shapes: tuple[tuple[int, ...], ...]
    tasks: int
    by_prefix: Mapping[str, int] = field(default_factory=dict)
    by_name: Mapping[str, int] = field(default_factory=dict)
    seed: int = 0

    @property
    def cluster(self) -> ClusterSpec:
        """One job of :attr:`tasks` tasks."""
        return ClusterSpec.local(self.tasks)

    def feeds(self) -> list[torch.Tensor]:
        """The feeds' values (seeded)."""
        g = torch.Generator().manual_seed(self.seed + 1)
        return [torch.randn(s, generator=g) for s in self.feed_shapes]

    def build(self) -> tuple[GraphDef, dict[str, torch.Tensor]]:
        """The captured, pruned and placed graph, and its feeds by placeholder name."""
        torch.manual_seed(self.seed)
        model, values = self.factory(), self.feeds()
        graph = prune(capture(model, *values))
        c = self.cluster
        graph = place(graph, c.device(0),
                      by_prefix={k: c.device(t) for k, t in self.by_prefix.items()},
                      by_name={k: c.device(t) for k, t in self.by_name.items()})
        return graph, dict(zip(graph.feeds, values, strict=True))

    def partitions(self) -> list[Partition]:
        """The partitions the master registers."""
        graph, _ = self.build()
        return partition(graph, self.cluster)


def _timed_client(spec: GraphSpec, repeats: int, warmup: int) -> list[float]:
    graph, feeds = spec.build()
    session = MasterSession(graph, spec.cluster)
    samples = []
    for k in range(warmup + repeats):
        start = time.perf_counter()
        session.run(feeds, backward=True, lr=LR)
        if k >= warmup:
            samples.append(time.perf_counter() - start)
    session.close()
    return samples


def timed_steps(spec: GraphSpec, repeats: int = 10, warmup: int = 2) -> list[float]:
    """Seconds of each of ``repeats`` training steps (after ``warmup``) on ``spec.tasks``
    processes, timed by the master."""
    return list(spawn(server, spec.tasks, _timed_client, spec, repeats, warmup,
                      timeout=60)[0])


@dataclass(frozen=True)
class NodeCost:
    """One node's one-thread costs, s: forward, backward (its vector-Jacobian product) and the
    SGD update of the variables it owns."""

    forward_s: float
    backward_s: float
    update_s: float


def _update_s(module: object, repeats: int) -> float:
    params = ([p for p in module.parameters() if p.requires_grad]
              if isinstance(module, nn.Module) else [module] if isinstance(module, nn.Parameter)
              else [])
    if not params:
        return 0.0
    grads = [torch.ones_like(p) for p in params]
    samples = []
    with torch.no_grad():
        for _ in range(repeats):
            start = time.perf_counter()
            for p, g in zip(params, grads, strict=True):
                p.sub_(LR * g)
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def profile_nodes(spec: GraphSpec, repeats: int = 10) -> dict[str, NodeCost]:
    """Every node of ``spec``'s graph on ONE process with one thread: the medians of
    ``repeats`` steps (after one warm-up) of the whole graph as a single partition, no Send
    nor Recv."""
    graph, feeds = spec.build()
    whole = partition(place(graph, "/job:worker/replica:0/task:0/device:CPU:0",
                            by_name={n.name: "/job:worker/replica:0/task:0/device:CPU:0"
                                     for n in graph.nodes}), ClusterSpec.local(1))[0]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs: list[Timings] = []
        for k in range(1 + repeats):
            timings: Timings = {}
            run_partition(whole, LocalRendezvous(), feeds, backward=True, timings=timings)
            if k:
                runs.append(timings)
        updates = {path: _update_s(obj, repeats) for path, obj in whole.owned.items()}
    finally:
        torch.set_num_threads(threads)
    out = {}
    for n in graph.nodes:
        fwd = [r[n.name][0] for r in runs if n.name in r]
        bwd = [r[n.name][1] for r in runs if n.name in r]
        owns = str(n.target) if n.op in ("call_module", "get_attr") else ""
        out[n.name] = NodeCost(statistics.median(fwd) if fwd else 0.0,
                               statistics.median(bwd) if bwd else 0.0, updates.get(owns, 0.0))
    return out
