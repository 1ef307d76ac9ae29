"""TensorFlow's dynamic runtime on the cluster model: one step of a partitioned graph.

Twin of :mod:`backends.tf_runtime` (book chapter 16). The master has partitioned a placed graph
over the tasks (``Partition()``), every tensor that crosses tasks a Send/Recv pair; one
training step is then, on every task at once:

* **RunGraph** — the master (rank 0, also task 0) sends each worker its request: a pickled
  message (a size header, then the payload: the feeds and gradient seeds, bytes);
* **forward** — the partition's ops in order: a node computes for its one-process profiled
  time, a Send posts its tensor (eager: the step goes on), a Recv waits for its tensor;
* **backward** — the ops in reverse: a node computes its gradient, a Send's tensor waits for
  its gradient to come back, a Recv's tensor sends its gradient back (eager);
* **update** — the SGD step of the partition's variables;
* **reply** — every worker returns its fetches to the master (header, payload).

Each message costs what the cluster's links charge (α + n/B in the textbook tier, with
contention and the host's effects in the host tier). Tags follow the real twin's: pair ``i``
uses ``tag`` for its tensor and ``tag + 1`` for its gradient. Seconds and bytes throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.core.comm import SimComm, SimGen, SimResult, SimWork, run_spmd
from simulator.core.hardware import Cluster

HEADER_BYTES = 8
"""The size header a pickled control message is preceded by (one int64), bytes."""

ENVELOPE_BYTES = 512
"""A RunGraph request or reply's pickled fields besides its tensors, bytes (an estimate; α
dominates)."""

_CONTROL_TAG = 1 << 30


@dataclass(frozen=True)
class SimOp:
    """One op of a partition: ``node`` (compute), ``send`` or ``recv``.

    Attributes:
        kind: ``node``, ``send`` or ``recv``.
        name: the op's name.
        forward_s, backward_s: a node's compute, s (one-process profile).
        peer: a send's destination or a recv's source rank.
        nbytes: the tensor a send or recv carries, bytes.
        tag: its message tag (its gradient's is ``tag + 1``).
        grad: whether a gradient comes back over the pair.
    """

    kind: str
    name: str
    forward_s: float = 0.0
    backward_s: float = 0.0
    peer: int = -1
    nbytes: int = 0
    tag: int = 0
    grad: bool = False


@dataclass(frozen=True)
class SimPartition:
    """One task's partition: its ops in order, its update (s) and the tensors of its RunGraph
    request (feeds, seeds) and reply (fetches), bytes."""

    ops: tuple[SimOp, ...]
    update_s: float = 0.0
    request_bytes: int = 0
    reply_bytes: int = 0


def _control(comm: SimComm, src: int, dst: int, nbytes: int, tag: int) -> SimGen:
    """A pickled message (``send_object_list``): its size header, then its payload."""
    for n, t in ((HEADER_BYTES, tag), (ENVELOPE_BYTES + nbytes, tag + 1)):
        if comm.rank == src:
            yield from comm.send(dst, n, _CONTROL_TAG + t)
        else:
            yield from comm.recv(src, n, _CONTROL_TAG + t)


def _compute(comm: SimComm, seconds: float, name: str) -> SimGen:
    if seconds > 0:
        yield from comm.compute(seconds * comm.device.flops_per_s, name)


def graph_step(comm: SimComm, partitions: Sequence[SimPartition]) -> SimGen:
    """Rank program of one step: RunGraph, forward, backward, update, reply."""
    me, workers = partitions[comm.rank], range(1, comm.world_size)
    for r in workers:  # the master's requests, one worker after the other
        if comm.rank in (0, r):
            yield from _control(comm, 0, r, partitions[r].request_bytes, 4 * r)
    pending: list[SimWork] = []
    for op in me.ops:
        if op.kind == "send":
            pending.append(comm.isend(op.peer, op.nbytes, op.tag))
        elif op.kind == "recv":
            yield from comm.recv(op.peer, op.nbytes, op.tag)
        else:
            yield from _compute(comm, op.forward_s, f"forward {op.name}")
    for op in reversed(me.ops):
        if op.kind == "send" and op.grad:
            yield from comm.recv(op.peer, op.nbytes, op.tag + 1)
        elif op.kind == "recv" and op.grad:
            pending.append(comm.isend(op.peer, op.nbytes, op.tag + 1))
        elif op.kind == "node":
            yield from _compute(comm, op.backward_s, f"backward {op.name}")
    yield from _compute(comm, me.update_s, "update")
    for work in pending:
        yield work.wait()
    for r in workers:  # the replies, collected in rank order
        if comm.rank in (0, r):
            yield from _control(comm, r, 0, partitions[r].reply_bytes, 4 * r + 2)


def simulate_graph_step(cluster: Cluster, partitions: Sequence[SimPartition]) -> SimResult:
    """One step of ``partitions`` on ``cluster`` (one rank per task)."""
    if cluster.world_size != len(partitions):
        raise ValueError(f"{len(partitions)} partitions need {len(partitions)} ranks, the "
                         f"cluster has {cluster.world_size}")
    check_pairs(partitions)
    return run_spmd(cluster, graph_step, list(partitions))


def check_pairs(partitions: Sequence[SimPartition]) -> None:
    """Every send has its recv on the peer (same tag, bytes and gradient), and back:
    :class:`ValueError` naming the first that does not."""
    sends = {(r, op.peer, op.tag): op for r, p in enumerate(partitions) for op in p.ops
             if op.kind == "send"}
    recvs = {(op.peer, r, op.tag): op for r, p in enumerate(partitions) for op in p.ops
             if op.kind == "recv"}
    for key in sends.keys() ^ recvs.keys():
        raise ValueError(f"send/recv from rank {key[0]} to {key[1]} tag {key[2]} has no match")
    for key, s in sends.items():
        r = recvs[key]
        if (s.nbytes, s.grad) != (r.nbytes, r.grad):
            raise ValueError(f"send {s.name} and recv {r.name} disagree on bytes or gradient")


def step_bytes(partitions: Sequence[SimPartition]) -> list[int]:
    """Bytes each task sends between partitions in one step: its sends' tensors and the
    gradients its recvs return (control messages not counted)."""
    return [sum(op.nbytes for op in p.ops
                if op.kind == "send" or (op.kind == "recv" and op.grad))
            for p in partitions]


def compute_s(partitions: Sequence[SimPartition]) -> list[float]:
    """Each task's compute in one step (forward, backward and update), s: the step's lower
    bound is the largest, reached only if no task ever waits."""
    return [sum(op.forward_s + op.backward_s for op in p.ops) + p.update_s
            for p in partitions]
