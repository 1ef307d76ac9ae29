"""Chapter 16 exercise: prune a graph to what its fetches need.

A step begins with the client naming its *fetches* — the tensors it wants back — and its
*feeds*. The master does not run the whole graph the client built: it first **prunes** it to
the nodes the fetches depend on (textbook chapter 16, "Pruning"; TensorFlow's
``subgraph::RewriteGraphForExecution``). A fetch of an intermediate activation runs only the
layers below it, and needs only the feeds those layers read.

The lab's graph is :class:`backends.tf_runtime.graph.GraphDef`: its ``nodes`` in a
topological order (every node after the nodes it reads), each a ``NodeDef`` whose ``inputs``
property lists the names of the nodes it reads. The lab's own pruning is
``backends.tf_runtime.graph.prune``; here you write its core.

Grade your answer::

    make grade EX=16.1

and read ``solutions/ch16_prune.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

from backends.tf_runtime.graph import GraphDef


def prune_names(graph: GraphDef, fetches: Sequence[str]) -> list[str]:
    """The names of the nodes ``fetches`` depend on (themselves included), in graph order.

    Raises:
        KeyError: a fetch names no node of the graph.
    """
    # ===== EXERCISE 16.1: prune a graph to its fetches =====================================
    #
    # Points: 6 (in proportion to the tests of ex16_1 that pass; `make grade EX=16.1`)
    #
    # Keep a node if it is a fetch, or if a kept node reads it: the fetches and all their
    # ancestors. Return the kept names in the order of graph.nodes (a topological order, so
    # the pruned graph still runs front to back).
    #
    # Hints:
    #   1. A walk backwards from the fetches: a stack (or queue) of names to visit, a set of
    #      names already kept; visiting a node pushes its inputs (node.inputs).
    #   2. A node reached twice (a skip connection, a tensor read by two layers) is kept
    #      once: check the set before pushing its inputs again.
    #   3. {n.name: n for n in graph.nodes} finds a node by name; a fetch not in it is a
    #      KeyError (a dict look-up raises it for you).
    #   4. The order comes last: filter graph.nodes by the set.
    #
    # What is graded (tests/exercises/test_ch16_prune.py, `make grade EX=16.1`):
    #   - on random graphs with random fetches, your names equal the nodes of
    #     backends.tf_runtime.graph.prune, in the same order;
    #   - the chapter's model (lab.tf_runtime.SkipMLP): fetching the first layer's
    #     activation keeps only it, its layer and the feed x — and the pruned graph, run by
    #     the lab's runtime with x alone fed, gives that activation; fetching the loss keeps
    #     every node;
    #   - a fetch that names no node raises KeyError.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 16.1: implement prune_names in "
                              "exercises/ch16_prune.py")
