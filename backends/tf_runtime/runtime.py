"""The dynamic runtime: a master registers partitions on workers and runs them step by step.

Book chapters 15–16. Every TensorFlow server (``tf.distribute.Server``) offers two services:
the **master service** (``MasterSession``: ``CreateSession`` prunes, places and partitions the
graph and registers each partition on its worker; ``RunStep`` runs one step) and the **worker
service** (``GraphMgr``: ``RegisterGraph`` keeps a partition under a handle, ``RunGraph``
executes it for one step, exchanging tensors through the step's rendezvous). Here:

* :func:`run_partition` — one partition's step (TensorFlow's ``ExecutorState``): feeds in,
  ops in order, Sends and Recvs through a :class:`~backends.tf_runtime.rendezvous.Rendezvous`;
  then, when asked, the backward pass in reverse order — each node's vector-Jacobian product
  (the gradient op ``tf.gradients`` would add), a Send's gradient received from the task it
  went to, a Recv's gradient returned — and an SGD update of the partition's variables;
* :class:`GraphMgr` — a worker's registered partitions (``RegisterGraph`` / ``RunGraph``);
* :class:`MasterSession` — on rank 0: partitions a placed graph over the cluster, registers
  the partitions (its own included: rank 0 is the master *and* task 0, as the server that
  hosts a client's session is also a worker), and runs steps: a ``RunGraph`` request to every
  worker (feeds, gradient seeds), its own partition, then every worker's reply (fetches);
* :func:`server` — the rank program under :func:`backends.launch.spawn`: rank 0 runs the
  client's function with a session, the other ranks serve requests until it closes.

Control messages are pickled objects (``send_object_list``, tag 0); tensors between
partitions cross with the rendezvous keys' own tags. Seconds and bytes throughout.
"""

from __future__ import annotations

import threading
import time
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from backends.tf_runtime.cluster import ClusterSpec
from backends.tf_runtime.graph import GraphDef, NodeDef, evaluate
from backends.tf_runtime.partition import Partition, RecvOp, SendOp, partition
from backends.tf_runtime.rendezvous import LocalRendezvous, ProcessRendezvous, Rendezvous

Timings = dict[str, list[float]]
"""Per node, ``[forward_s, backward_s]`` of the last step run with timings."""


def _add(grads: dict[str, torch.Tensor], name: str, g: torch.Tensor | None) -> None:
    if g is not None:
        grads[name] = grads[name] + g if name in grads else g


def _accumulate(p: torch.Tensor, g: torch.Tensor | None) -> None:
    if g is not None:
        p.grad = g.detach().clone() if p.grad is None else p.grad + g


def run_partition(part: Partition, rendezvous: Rendezvous, feeds: Mapping[str, torch.Tensor],
                  backward: bool = False, grad_outputs: Mapping[str, torch.Tensor] | None = None,
                  lr: float | None = None, timings: Timings | None = None
                  ) -> dict[str, torch.Tensor]:
    """One step of ``part``: its fetches' values (detached).

    ``backward``: also run the backward pass, seeding each fetch of this partition with
    ``grad_outputs[fetch]`` (default ones); each variable's ``.grad`` is then this step's
    gradient, and ``lr`` (if given) takes an SGD step on it. ``timings``, if given, gets each
    node's forward and backward seconds.
    """
    values: dict[str, Any] = {}
    needs: dict[str, bool] = {}
    tape: dict[str, tuple[dict[str, torch.Tensor], Any]] = {}
    owner = part.owned.__getitem__
    for op in part.ops:
        if isinstance(op, SendOp):
            rendezvous.send(op.key, values[op.tensor], op.peer, op.tag)
        elif isinstance(op, RecvOp):
            values[op.tensor] = rendezvous.recv(op.key, op.peer, op.tag, op.shape, op.dtype)
            needs[op.tensor] = op.needs_grad
        elif op.op == "placeholder":
            values[op.name] = _feed(op, feeds)
            needs[op.name] = False
        else:
            start = time.perf_counter()
            if op.needs_grad and backward:
                leaves = {i: values[i].detach().requires_grad_() for i in op.inputs
                          if needs[i]}
                with torch.enable_grad():
                    out = evaluate(op, ChainMap(leaves, values), owner)
                tape[op.name] = (leaves, out)
                values[op.name] = out.detach()
            else:
                with torch.no_grad():
                    values[op.name] = evaluate(op, values, owner)
            needs[op.name] = op.needs_grad
            if timings is not None:
                timings[op.name] = [time.perf_counter() - start, 0.0]
    fetched = {f: values[f] for f in part.fetches}
    if backward:
        _backward(part, rendezvous, values, tape, grad_outputs or {}, lr, timings)
    rendezvous.finish()
    return fetched


def _feed(op: NodeDef, feeds: Mapping[str, torch.Tensor]) -> torch.Tensor:
    if op.name not in feeds:
        raise KeyError(f"no value fed for {op.name!r}")
    value = feeds[op.name]
    if op.shape is not None and tuple(value.shape) != op.shape:
        raise ValueError(f"{op.name!r} was registered with shape {op.shape}, fed "
                         f"{tuple(value.shape)}")
    return value


def _backward(part: Partition, rendezvous: Rendezvous, values: Mapping[str, Any],
              tape: Mapping[str, tuple[dict[str, torch.Tensor], Any]],
              grad_outputs: Mapping[str, torch.Tensor], lr: float | None,
              timings: Timings | None) -> None:
    """The partition's backward pass, its ops in reverse (see :func:`run_partition`)."""
    params = part.parameters()
    for p in params.values():
        p.grad = None
    grads: dict[str, torch.Tensor] = {}
    for f in part.fetches:
        if f in tape:
            _add(grads, f, grad_outputs.get(f, torch.ones_like(values[f])))
    for op in reversed(part.ops):
        if isinstance(op, SendOp) and op.needs_grad:
            _add(grads, op.tensor, rendezvous.recv(op.grad_key, op.peer, op.tag + 1,
                                                   op.shape, op.dtype))
        elif isinstance(op, RecvOp) and op.needs_grad:
            g = grads.pop(op.tensor, None)
            rendezvous.send(op.grad_key, torch.zeros(op.shape, dtype=op.dtype) if g is None
                            else g, op.peer, op.tag + 1)
        elif isinstance(op, NodeDef) and op.name in tape and op.name in grads:
            start = time.perf_counter()
            g = grads.pop(op.name)
            leaves, out = tape[op.name]
            if op.op == "get_attr":
                _accumulate(out, g)
            else:
                own = (list(part.owned[str(op.target)].parameters())
                       if op.op == "call_module" else [])
                own = [p for p in own if p.requires_grad]
                got = torch.autograd.grad(out, [*leaves.values(), *own], g, allow_unused=True)
                for name, gi in zip(leaves, got, strict=False):
                    _add(grads, name, gi)
                for p, gp in zip(own, got[len(leaves):], strict=True):
                    _accumulate(p, gp)
            if timings is not None and op.name in timings:
                timings[op.name][1] = time.perf_counter() - start
    if lr is not None:
        with torch.no_grad():
            for p in params.values():
                if p.grad is not None:
                    p.sub_(lr * p.grad)


def run_local(partitions: list[Partition], feeds: Mapping[str, torch.Tensor],
              backward: bool = False, grad_outputs: Mapping[str, torch.Tensor] | None = None,
              lr: float | None = None) -> dict[str, torch.Tensor]:
    """Every partition in this process, one thread each, through one
    :class:`~backends.tf_runtime.rendezvous.LocalRendezvous` (TensorFlow's ``DirectSession``
    running a graph over several devices of one task): the fetches of all of them."""
    rendezvous = LocalRendezvous()
    out: dict[str, torch.Tensor] = {}
    errors: list[BaseException] = []

    def one(part: Partition) -> None:
        try:
            out.update(run_partition(part, rendezvous, {f: feeds[f] for f in part.feeds},
                                     backward, grad_outputs, lr))
        except BaseException as e:
            errors.append(e)
            rendezvous.timeout_s = 0.0

    threads = [threading.Thread(target=one, args=(p,)) for p in partitions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


class GraphMgr:
    """A worker's graphs: TensorFlow's ``GraphMgr`` behind ``RegisterGraph``/``RunGraph``."""

    def __init__(self) -> None:
        self.graphs: dict[str, Partition] = {}
        self.registered = 0

    def register_graph(self, part: Partition) -> str:
        """Keep ``part``; its handle for :meth:`run_graph`."""
        self.registered += 1
        handle = f"graph_{self.registered}_task{part.rank}"
        self.graphs[handle] = part
        return handle

    def run_graph(self, handle: str, step_id: int, feeds: Mapping[str, torch.Tensor],
                  backward: bool, grad_outputs: Mapping[str, torch.Tensor],
                  lr: float | None) -> dict[str, torch.Tensor]:
        """One step of the registered partition with a rendezvous across processes."""
        return run_partition(self.graphs[handle], ProcessRendezvous(), feeds, backward,
                             grad_outputs, lr)

    def deregister_graph(self, handle: str) -> None:
        """Forget the partition of ``handle``."""
        del self.graphs[handle]

    def gradients(self, handle: str) -> dict[str, torch.Tensor]:
        """The partition's variables' gradients of the last backward step, by path."""
        return {k: p.grad.clone() for k, p in self.graphs[handle].parameters().items()
                if p.grad is not None}

    def variables(self, handle: str) -> dict[str, torch.Tensor]:
        """The partition's variables, by path (copies)."""
        return {k: p.detach().clone() for k, p in self.graphs[handle].parameters().items()}


@dataclass(frozen=True)
class _Request:
    method: str  # RegisterGraph, RunGraph, Gradients, Variables, DeregisterGraph, Shutdown
    handle: str = ""
    partition: Partition | None = None
    step_id: int = 0
    feeds: Mapping[str, torch.Tensor] | None = None
    backward: bool = False
    grad_outputs: Mapping[str, torch.Tensor] | None = None
    lr: float | None = None


def _call(rank: int, request: _Request) -> Any:
    dist.send_object_list([request], dst=rank)
    return _reply_from(rank)


def _reply_from(rank: int) -> Any:
    box: list[Any] = [None]
    dist.recv_object_list(box, src=rank)
    return box[0]


class MasterSession:
    """Rank 0's session over a placed graph: TensorFlow's ``MasterSession``.

    Creating it partitions ``graph`` over ``cluster`` and registers every partition
    (``RegisterGraph``); :meth:`run` is one step (``RunStep``)."""

    def __init__(self, graph: GraphDef, cluster: ClusterSpec) -> None:
        if dist.get_world_size() != cluster.world_size:
            raise ValueError(f"the cluster has {cluster.world_size} tasks, the launch "
                             f"{dist.get_world_size()} processes")
        self.graph, self.cluster = graph, cluster
        self.partitions = partition(graph, cluster)
        self.local = GraphMgr()
        self.handles = [self.local.register_graph(self.partitions[0])]
        for r in range(1, cluster.world_size):
            self.handles.append(_call(r, _Request("RegisterGraph",
                                                  partition=self.partitions[r])))
        self.step_id = 0

    def run(self, feeds: Mapping[str, torch.Tensor], backward: bool = False,
            grad_outputs: Mapping[str, torch.Tensor] | None = None,
            lr: float | None = None) -> dict[str, torch.Tensor]:
        """One step: every fetch's value (and, with ``backward``, every variable's gradient
        left where it lives, :meth:`gradients`)."""
        self.step_id += 1
        seeds = grad_outputs or {}
        for r in range(1, self.cluster.world_size):
            p = self.partitions[r]
            dist.send_object_list([_Request(
                "RunGraph", self.handles[r], step_id=self.step_id,
                feeds={f: feeds[f] for f in p.feeds}, backward=backward,
                grad_outputs={f: seeds[f] for f in p.fetches if f in seeds}, lr=lr)], dst=r)
        p0 = self.partitions[0]
        out = run_partition(p0, ProcessRendezvous(), {f: feeds[f] for f in p0.feeds},
                            backward, seeds, lr)
        for r in range(1, self.cluster.world_size):
            out.update(_reply_from(r))
        return {f: out[f] for f in self.graph.fetches}

    def gradients(self) -> dict[str, torch.Tensor]:
        """Every variable's gradient of the last backward step, by module path."""
        out = self.local.gradients(self.handles[0])
        for r in range(1, self.cluster.world_size):
            out.update(_call(r, _Request("Gradients", self.handles[r])))
        return out

    def variables(self) -> dict[str, torch.Tensor]:
        """Every variable's value now, by module path."""
        out = self.local.variables(self.handles[0])
        for r in range(1, self.cluster.world_size):
            out.update(_call(r, _Request("Variables", self.handles[r])))
        return out

    def close(self) -> None:
        """End the session: every worker forgets its partition (``DeregisterGraph``)."""
        self.local.deregister_graph(self.handles[0])
        for r in range(1, self.cluster.world_size):
            _call(r, _Request("DeregisterGraph", self.handles[r]))


def serve_worker() -> None:
    """A worker's service loop: answer the master's requests until ``Shutdown``."""
    mgr = GraphMgr()
    while True:
        req: _Request = _reply_from(0)
        if req.method == "Shutdown":
            return
        if req.method == "RegisterGraph":
            assert req.partition is not None
            reply: Any = mgr.register_graph(req.partition)
        elif req.method == "RunGraph":
            reply = mgr.run_graph(req.handle, req.step_id, req.feeds or {}, req.backward,
                                  req.grad_outputs or {}, req.lr)
        elif req.method == "Gradients":
            reply = mgr.gradients(req.handle)
        elif req.method == "Variables":
            reply = mgr.variables(req.handle)
        elif req.method == "DeregisterGraph":
            mgr.deregister_graph(req.handle)
            reply = None
        else:
            raise ValueError(f"unknown request {req.method!r}")
        dist.send_object_list([reply], dst=0)


def server(client: Callable[..., Any], *args: Any) -> Any:
    """Rank program (``tf.distribute.Server`` per task): rank 0 returns ``client(*args)``,
    which opens and closes :class:`MasterSession` s; the others serve until it returns."""
    if dist.get_rank() != 0:
        serve_worker()
        return None
    value = client(*args)
    for r in range(1, dist.get_world_size()):
        dist.send_object_list([_Request("Shutdown")], dst=r)
    return value
