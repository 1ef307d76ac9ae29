"""Graph partitioning: one subgraph per task, a Send/Recv pair on every edge between tasks.

Book chapter 16. After placement the master splits the graph by task (TensorFlow's
``Partition()`` in ``graph_partition.cc``, one ``GraphDef`` per device, here per task: the
lab's tasks have one device each). Every edge ``u → v`` whose ends lie on different tasks is
cut and replaced by a :class:`SendOp` after ``u`` in ``u``'s partition and a :class:`RecvOp`
before ``v`` in ``v``'s, both carrying the same rendezvous key
(:func:`backends.tf_runtime.rendezvous.rendezvous_key`). One pair per tensor and destination
task: a tensor read by two nodes of one task crosses once; a tensor read on two other tasks
crosses twice (two pairs). The partitions keep the graph's order, so running each in its own
order never deadlocks: every Recv's Send comes earlier in one global order.

The backward pass mirrors the cut (what ``tf.gradients`` would add as gradient nodes before
partitioning): a tensor that needs a gradient sends it back from the Recv's task to the Send's
task under its own key (``…;relu/grad:0;…``).

Variables (``call_module`` parameters, ``get_attr`` tensors) live in the partition that uses
them, as TensorFlow keeps a variable on its device; one module on two tasks is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from backends.tf_runtime.cluster import ClusterSpec, DeviceName
from backends.tf_runtime.graph import GraphDef, NodeDef, attribute
from backends.tf_runtime.rendezvous import rendezvous_key

FIRST_TAG = 1
"""Message tags from here on are the rendezvous keys' (tag 0 is the master's control
messages): pair ``i`` sends its tensor with ``FIRST_TAG + 2i`` and its gradient with
``FIRST_TAG + 2i + 1``."""


@dataclass(frozen=True)
class _Transfer:
    """What a Send and its Recv share: the tensor (by its node's name), its rendezvous key and
    its gradient's, the peer rank, the tag (the gradient's is ``tag + 1``), its shape and dtype,
    and whether a gradient comes back."""

    name: str
    tensor: str
    key: str
    grad_key: str
    peer: int
    tag: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    needs_grad: bool

    @property
    def nbytes(self) -> int:
        """Bytes the tensor (and its gradient) carries."""
        n = 1
        for d in self.shape:
            n *= d
        return n * self.dtype.itemsize


@dataclass(frozen=True)
class SendOp(_Transfer):
    """TensorFlow's ``_Send``: hand ``tensor`` to the rendezvous under ``key`` for rank
    ``peer``; in the backward pass, receive its gradient (``grad_key``) from there."""


@dataclass(frozen=True)
class RecvOp(_Transfer):
    """TensorFlow's ``_Recv``: take ``tensor`` from the rendezvous (from rank ``peer``); in the
    backward pass, send its gradient back. Its output keeps the tensor's name."""


Op = NodeDef | SendOp | RecvOp


@dataclass(frozen=True)
class Partition:
    """The subgraph one task runs: its ops in order, the feeds and fetches that live on it, and
    the variables (submodules, tensors by module path) its nodes use."""

    task: str
    rank: int
    ops: tuple[Op, ...]
    feeds: tuple[str, ...]
    fetches: tuple[str, ...]
    owned: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sends(self) -> list[SendOp]:
        """Its Send ops."""
        return [op for op in self.ops if isinstance(op, SendOp)]

    @property
    def recvs(self) -> list[RecvOp]:
        """Its Recv ops."""
        return [op for op in self.ops if isinstance(op, RecvOp)]

    def parameters(self) -> dict[str, torch.nn.Parameter]:
        """Its trainable parameters by full module path (``encoder.0.weight``)."""
        out: dict[str, torch.nn.Parameter] = {}
        for path, obj in self.owned.items():
            if isinstance(obj, torch.nn.Module):
                out.update({f"{path}.{k}": p for k, p in obj.named_parameters()
                            if p.requires_grad})
            elif isinstance(obj, torch.nn.Parameter) and obj.requires_grad:
                out[path] = obj
        return out


def partition(graph: GraphDef, cluster: ClusterSpec,
              incarnations: Mapping[str, int] | None = None) -> list[Partition]:
    """Split a placed graph into one :class:`Partition` per task of ``cluster`` (by launcher
    rank; a task with no node gets an empty one). ``incarnations`` gives each device's
    incarnation number for the keys (default 1)."""
    rank_of = {n.name: cluster.rank(n.device) for n in graph.nodes}
    node_of = {n.name: n for n in graph.nodes}
    ops: list[list[Op]] = [[] for _ in range(cluster.world_size)]
    owned: list[dict[str, Any]] = [{} for _ in range(cluster.world_size)]
    variable_rank: dict[str, int] = {}
    pairs: dict[tuple[str, int], int] = {}  # (tensor, destination rank) -> pair index

    def cut(u: NodeDef, dst: int, dst_device: str) -> None:
        if u.shape is None or u.dtype is None:
            raise ValueError(f"{u.name!r} crosses from {u.device} to {dst_device} but is not "
                             "one tensor; place it with its consumers")
        i = len(pairs)
        pairs[(u.name, dst)] = i
        inc = (incarnations or {}).get(u.device, 1)
        key = rendezvous_key(u.device, inc, dst_device, f"{u.name}:0")
        grad_key = rendezvous_key(dst_device, (incarnations or {}).get(dst_device, 1),
                                  u.device, f"{u.name}/grad:0")
        tag = FIRST_TAG + 2 * i
        src_ops = ops[rank_of[u.name]]
        # right after u and the Sends already made for it: the tensor leaves as soon as it
        # exists
        at = next(k for k, op in enumerate(src_ops) if op is u) + 1
        while at < len(src_ops) and isinstance(src_ops[at], SendOp):
            at += 1
        src_ops.insert(at, SendOp(f"send_{u.name}_to_{dst}", u.name, key, grad_key, dst, tag,
                                  u.shape, u.dtype, u.needs_grad))
        src = rank_of[u.name]
        ops[dst].append(RecvOp(f"recv_{u.name}_from_{src}", u.name, key, grad_key, src, tag,
                               u.shape, u.dtype, u.needs_grad))

    for n in graph.nodes:
        r = rank_of[n.name]
        for i in n.inputs:
            if rank_of[i] != r and (i, r) not in pairs:
                cut(node_of[i], r, n.device)
        ops[r].append(n)
        if n.op in ("call_module", "get_attr"):
            path = str(n.target)
            if variable_rank.setdefault(path, r) != r:
                raise ValueError(f"{path!r} is used on two tasks ({cluster.device(r)} and "
                                 f"{cluster.device(variable_rank[path])}); a variable lives "
                                 "on one: place its uses together")
            owned[r][path] = attribute(graph.module, path)
    return [Partition(task=cluster.device(r).task_name, rank=r, ops=tuple(ops[r]),
                      feeds=tuple(n.name for n in graph.nodes
                                  if n.op == "placeholder" and rank_of[n.name] == r),
                      fetches=tuple(f for f in graph.fetches if rank_of[f] == r),
                      owned=owned[r])
            for r in range(cluster.world_size)]


def cut_edges(graph: GraphDef) -> list[tuple[str, str]]:
    """Every ``(tensor, destination task)`` that crosses tasks in a placed graph, in graph
    order: the Send/Recv pairs :func:`partition` inserts."""
    out: list[tuple[str, str]] = []
    task = {n.name: DeviceName.parse(n.device).task_name for n in graph.nodes}
    for n in graph.nodes:
        for i in n.inputs:
            if task[i] != task[n.name] and (i, task[n.name]) not in out:
                out.append((i, task[n.name]))
    return out


def bytes_sent(partitions: list[Partition], backward: bool = True) -> list[int]:
    """Bytes each partition sends in one step: its Sends' tensors, plus (``backward``) the
    gradients its Recvs return."""
    out = []
    for p in partitions:
        n = sum(s.nbytes for s in p.sends)
        if backward:
            n += sum(r.nbytes for r in p.recvs if r.needs_grad)
        out.append(n)
    return out
