"""Chapter 16, reference answer: a graph pruned to its fetches (exercise in
``exercises/ch16_prune.py``; the lab's own is :func:`backends.tf_runtime.graph.prune`)."""

from __future__ import annotations

from collections.abc import Sequence

from backends.tf_runtime.graph import GraphDef


def prune_names(graph: GraphDef, fetches: Sequence[str]) -> list[str]:
    """Walk back from the fetches, keeping every node reached once; then graph order."""
    by_name = {n.name: n for n in graph.nodes}
    keep: set[str] = set()
    stack = list(fetches)
    while stack:
        name = stack.pop()
        if name not in keep:
            stack.extend(by_name[name].inputs)  # KeyError for an unknown fetch
            keep.add(name)
    return [n.name for n in graph.nodes if n.name in keep]
