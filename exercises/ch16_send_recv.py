"""Chapter 16 exercise: where the partitioner cuts a placed graph, and the Send/Recv pairs.

After placement every node has a device; the master then splits the graph into one partition
per task (textbook chapter 16, "Partitioning"; TensorFlow's ``Partition()``). Every edge
``u → v`` whose ends lie on different tasks is cut: a ``_Send`` of ``u``'s tensor goes into
``u``'s partition, a ``_Recv`` into ``v``'s, and both carry the same rendezvous key
(exercise 15.3). The rules that keep the traffic down:

* **one pair per tensor and destination task** — a tensor read by three nodes of task 1
  crosses once, and the three read the one Recv;
* a tensor read on two other tasks crosses twice (one pair per destination);
* an edge inside one task is never cut.

The lab's partitioner is ``backends.tf_runtime.partition.partition``; here you find its pairs.

Grade your answer::

    make grade EX=16.2

and read ``solutions/ch16_send_recv.py`` afterwards.
"""

from __future__ import annotations

from backends.tf_runtime.cluster import ClusterSpec
from backends.tf_runtime.graph import GraphDef
from backends.tf_runtime.rendezvous import rendezvous_key  # noqa: F401 (for the pairs)

Pair = tuple[str, int, int, str]
"""``(tensor, src_rank, dst_rank, key)``: the node whose output crosses, the launcher ranks
of the Send's and the Recv's tasks, and the pair's rendezvous key."""


def send_recv_pairs(graph: GraphDef, cluster: ClusterSpec, incarnation: int = 1) -> list[Pair]:
    """Every Send/Recv pair the partitioner inserts into the placed ``graph``, in the order
    the pairs are first needed (the order of the nodes that read them)."""
    # ===== EXERCISE 16.2: insert Send/Recv pairs for a placement ===========================
    #
    # Points: 6 (in proportion to the tests of ex16_2 that pass; `make grade EX=16.2`)
    #
    # Walk the nodes in graph order; for each input u of a node v (v.inputs, names) whose
    # task differs from v's, make a pair — unless (u, v's task) already has one. Each pair:
    #   tensor    u's name;
    #   src_rank  the rank of u's task, dst_rank the rank of v's (cluster.rank(device));
    #   key       rendezvous_key(u's device, incarnation, v's device, "<u's name>:0") —
    #             the tensor name is the node's first (and only) output, ":0"; the
    #             destination device is that of v, the first reader that needed the pair.
    #
    # Hints:
    #   1. Every node's device is a full name (node.device); cluster.rank maps it to the
    #      rank of its task — two devices of one task have the same rank.
    #   2. A set of (tensor, destination rank) remembers the pairs already made.
    #   3. A feed (placeholder) is a tensor like any other: it crosses too if read elsewhere.
    #
    # What is graded (tests/exercises/test_ch16_send_recv.py, `make grade EX=16.2`):
    #   - on random placed graphs, your pairs equal the Send ops of the lab's partition()
    #     (tensor, ranks and key) taken in pair order (their message tags), and their
    #     (tensor, destination task) equal backends.tf_runtime.partition.cut_edges;
    #   - the chapter's model (lab.tf_runtime.SkipMLP) over 1–4 tasks: the same, and one
    #     pair per cut plus two to the last task (the skip connection's tensor, the target).
    # =======================================================================================
    raise NotImplementedError("EXERCISE 16.2: implement send_recv_pairs in "
                              "exercises/ch16_send_recv.py")
