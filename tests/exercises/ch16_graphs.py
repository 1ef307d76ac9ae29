"""Graphs the chapter-16 graders share (exercises 16.1–16.3): random placed DAGs of
:class:`~backends.tf_runtime.graph.NodeDef` s, and the chapter's real model placed over tasks.

A random graph's nodes are ``n0, n1, …`` in topological order: the first one or two are
placeholders (feeds), every other node reads one to three earlier nodes. Each output is a
float32 tensor of a random shape; a node needs a gradient at random (a feed never does), and
sits on a random task of a one-job cluster (:meth:`ClusterSpec.local`).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from backends.tf_runtime.cluster import ClusterSpec
from backends.tf_runtime.graph import GraphDef, NodeDef, Ref


@st.composite
def placed_graphs(draw, max_nodes: int = 12, max_tasks: int = 4) -> tuple[GraphDef, ClusterSpec]:
    """A random placed graph and its cluster."""
    tasks = draw(st.integers(1, max_tasks), label="tasks")
    cluster = ClusterSpec.local(tasks)
    n = draw(st.integers(2, max_nodes), label="nodes")
    feeds = draw(st.integers(1, min(2, n - 1)), label="feeds")
    nodes = []
    for i in range(n):
        shape = (draw(st.integers(1, 4)), draw(st.integers(1, 64)))
        device = str(cluster.device(draw(st.integers(0, tasks - 1))))
        if i < feeds:
            nodes.append(NodeDef(f"n{i}", "placeholder", f"n{i}", device=device, shape=shape,
                                 dtype=torch.float32))
            continue
        inputs = draw(st.lists(st.integers(0, i - 1), min_size=1, max_size=3))
        nodes.append(NodeDef(f"n{i}", "call_function", torch.add,
                             args=tuple(Ref(f"n{j}") for j in inputs), device=device,
                             shape=shape, dtype=torch.float32, needs_grad=draw(st.booleans())))
    fetches = draw(st.lists(st.sampled_from([x.name for x in nodes[feeds:]]), min_size=1,
                            max_size=3, unique=True), label="fetches")
    return GraphDef(tuple(nodes), tuple(fetches), torch.nn.Module()), cluster


def skip_mlp(tasks: int, batch: int = 4):
    """The chapter's model (:class:`lab.tf_runtime.SkipMLP`) placed over ``tasks`` tasks:
    ``(graph, feeds, cluster)``."""
    from lab.tf_runtime import graph_spec

    spec = graph_spec(tasks, batch)
    graph, feeds = spec.build()
    return graph, feeds, spec.cluster
