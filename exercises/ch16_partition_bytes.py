"""Chapter 16 exercise: the bytes a placement moves per step, and their α-β time.

Every Send/Recv pair of a partitioned graph (exercise 16.2) moves its tensor once per step,
forward; in a training step, if the tensor needs a gradient, the gradient (same shape, same
bytes) comes back the other way, from the Recv's task to the Send's (textbook chapter 16,
"Bytes per step"). So a placement's traffic is a sum over its pairs, and each message costs
``α + nβ`` in the α-β model (eq. eq-tf-pair, the request already waiting)::

    2 tasks, contiguous, 8-layer MLP, activations of a = 512 KiB:
        one pair forward + its gradient back = 2 messages, 1 MiB, 2(α + aβ)

The lab counts the same with ``backends.tf_runtime.partition.bytes_sent`` on the real
partitions, and its simulated twin with ``simulator.tf_runtime.step_bytes``.

Grade your answer::

    make grade EX=16.3

and read ``solutions/ch16_partition_bytes.py`` afterwards.
"""

from __future__ import annotations

from backends.tf_runtime.cluster import ClusterSpec
from backends.tf_runtime.graph import GraphDef


def bytes_per_task(graph: GraphDef, cluster: ClusterSpec) -> list[int]:
    """Bytes each task (by launcher rank) sends to other tasks in one training step of the
    placed ``graph``: forward tensors and returned gradients."""
    # ===== EXERCISE 16.3: bytes per partition per step, and their α-β time =================
    #
    # Points: 6 (in proportion to the tests of ex16_3 that pass; `make grade EX=16.3`)
    #
    # bytes_per_task: for each Send/Recv pair (tensor u from task s to task d, one per
    # tensor and destination task, as in exercise 16.2):
    #   - s sends u's bytes forward (node.nbytes: elements × bytes per element);
    #   - if u needs a gradient (node.needs_grad), d sends the gradient, the same bytes,
    #     back to s in the backward pass.
    # Return a list with one entry per rank (cluster.world_size), zeros included.
    #
    # transfer_time_s: every one of those messages costs α + n·β; return their sum, s —
    # the time the transfers would take one after another (the step's critical path may
    # hide some of it behind computation; that is the simulator's job).
    #
    # Hints:
    #   1. Count the pairs as exercise 16.2 makes them: walk the nodes, and for each input
    #      on another task remember (tensor, destination rank) once.
    #   2. A feed crossing tasks never needs a gradient; a weight's activation does.
    #   3. Check yourself on the chapter's numbers: α = 20 µs, 10 Gb/s, a = 512 KiB, 2 tasks:
    #      0.88 ms; 4 tasks: 2.64 ms.
    #
    # What is graded (tests/exercises/test_ch16_partition_bytes.py, `make grade EX=16.3`):
    #   - on random placed graphs, bytes_per_task equals bytes_sent of the lab's partitions
    #     and step_bytes of the simulated twin's partitions, rank by rank;
    #   - transfer_time_s equals α·(messages) + β·(bytes) counted on the lab's partitions;
    #   - the chapter's 8-layer MLP split over 1, 2, 4 and 8 tasks: 0, 1, 3 and 7 MiB and
    #     the chapter's 0, 0.88 and 2.64 ms at α = 20 µs and 10 Gb/s.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 16.3: implement bytes_per_task in "
                              "exercises/ch16_partition_bytes.py")


def transfer_time_s(graph: GraphDef, cluster: ClusterSpec, alpha_s: float,
                    beta_s_per_B: float) -> float:
    """The summed α-β time of every message of one training step between tasks, s
    (EXERCISE 16.3)."""
    raise NotImplementedError("EXERCISE 16.3: implement transfer_time_s in "
                              "exercises/ch16_partition_bytes.py")
