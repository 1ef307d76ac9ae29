"""Model parallelism over PyTorch RPC: RRefs, distributed autograd, the distributed optimizer.

Book chapter 13 ("How PyTorch supports model parallelism"). ``torch.distributed.rpc`` lets one
process call functions in another (``rpc_sync``, ``rpc_async``), create objects there and keep a
*remote reference* to them (``remote`` → ``RRef``); **distributed autograd** records every RPC
that carries tensors in a forward pass (a ``send``/``recv`` function pair in each process's
graph) so that ``dist_autograd.backward`` can walk the graph across processes, and
``DistributedOptimizer`` steps each parameter where it lives. RPC is deprecated in recent
PyTorch releases (in maintenance mode); it still works in the version the lab pins, which is what
this module and its tests check (importing the distributed optimizer triggers TorchScript
deprecation warnings, which Python hides by default).

Three programs, all driven from rank 0 (the *driver*) with the others as *workers*:

* :class:`SplitModel` — a sequential model cut into stages, one per worker, held through RRefs:
  the driver sends the input to stage 1, gets its output back, sends it to stage 2, …
  (``rpc_sync`` per stage), and trains with distributed autograd and ``DistributedOptimizer``;
* :meth:`SplitModel.pipelined_forward` — the same stages fed with micro-batches through
  ``rpc_async``: a worker may run micro-batch ``j + 1`` while the next runs ``j``
  (the RPC pipeline of the PyTorch tutorials), output equal to the plain forward;
* :class:`RpcParameterServer` — a parameter server object on the driver; trainers pull the
  parameters, compute gradients on their data and push them; the server applies each round's
  averaged gradient (synchronous, ``@rpc.functions.async_execution`` waits for every trainer).

:func:`init_rpc` starts RPC inside a process group made by :func:`backends.launch.spawn` (its
rendezvous store listens on loopback, its port agreed over that group), with a short timeout;
:func:`shutdown` stops it. Every rank computes on its device (:func:`backends.device.device`):
on GPUs each agent is given a *device map* per peer (TensorPipe's ``set_device_map``: my
``cuda:i`` → its ``cuda:j``), so CUDA tensors cross RPC device to device and replies come back
along the inverse map; stages, servers and trainers put their modules and inputs there.
Times are seconds, sizes bytes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast
from urllib.parse import parse_qsl, urlparse

import torch
import torch.distributed as dist
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import nn
from torch.distributed.optim import DistributedOptimizer
from torch.distributed.rendezvous import register_rendezvous_handler

from backends.device import device, on_device, to_device
from backends.rendezvous import group_store
from backends.trace import Tracer, span

DEFAULT_RPC_TIMEOUT_S = 30.0


def worker_name(rank: int) -> str:
    """The RPC name of ``rank``."""
    return f"worker{rank}"


def _group_rendezvous(url: str, **kwargs: Any) -> Iterator[tuple[Any, int, int]]:
    """RPC's rendezvous for ``init_method="distml-group://?timeout_s=T"``: a fresh store that
    rank 0 of the default process group serves on loopback or ``MASTER_ADDR``, its port sent
    over the group (:func:`backends.rendezvous.group_store`). RPC's own ``tcp://`` rendezvous
    would make rank 0's store listen on every interface."""
    query = dict(parse_qsl(urlparse(url).query))
    yield group_store(float(query["timeout_s"])), int(query["rank"]), int(query["world_size"])
    raise RuntimeError("the distml-group rendezvous runs once per init_rpc")


register_rendezvous_handler("distml-group", _group_rendezvous)  # type: ignore[no-untyped-call]


def init_rpc(timeout_s: float = DEFAULT_RPC_TIMEOUT_S) -> None:
    """Start RPC on every rank of the default process group, timeout ``timeout_s`` s.

    The rendezvous store listens on loopback (:func:`_group_rendezvous`); each rank's
    TensorPipe agent listens on the interface ``TP_SOCKET_IFNAME`` names, which
    :func:`backends.launch.spawn` sets to ``lo``. On CUDA every rank's GPU index is shared
    over the process group and each peer gets a device map (mine → its)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"distml-group://?timeout_s={timeout_s:g}", rpc_timeout=timeout_s,
        num_worker_threads=8)
    mine = device()
    if mine.type == "cuda":
        indices: list[Any] = [None] * world
        dist.all_gather_object(indices, mine.index)
        for peer, index in enumerate(indices):
            if peer != rank:
                options.set_device_map(worker_name(peer), {mine.index: index})
    rpc.init_rpc(worker_name(rank), rank=rank, world_size=world,  # type: ignore[no-untyped-call]
                 rpc_backend_options=options)


def shutdown() -> None:
    """Stop RPC on this rank once every rank's outstanding work is done."""
    rpc.shutdown(graceful=True)


# ---- a model split across workers ----------------------------------------------------------

class Stage(nn.Module):
    """One stage, living on a worker: built there from a factory, run under a lock (RPC
    requests arrive on a pool of threads), its parameters offered as RRefs."""

    def __init__(self, factory: Callable[[], nn.Module], index: int = 0,
                 trace: bool = False) -> None:
        super().__init__()
        self.net = on_device(factory())
        self.lock = threading.Lock()
        self.busy_s = 0.0
        self.index = index
        self.tracer = Tracer(rank=dist.get_rank() if trace else 0, enabled=trace)
        """``compute`` spans ``forward {index}`` of this worker (when ``trace``)."""

    def forward(self, x: torch.Tensor | rpc.RRef[Any]) -> torch.Tensor:
        """Run the stage on ``x`` (a tensor, or an RRef to one held elsewhere)."""
        if not isinstance(x, torch.Tensor):  # an RRef (a PyRRef once it crossed the wire)
            x = x.to_here()
        x = to_device(x)
        with self.lock, self.tracer.span("compute", f"forward {self.index}"):
            start = time.perf_counter()
            out = self.net(x)
            self.busy_s += time.perf_counter() - start
        return cast(torch.Tensor, out)

    def trace_records(self, clear: bool = True) -> list[dict[str, Any]]:
        """This worker's spans so far as records (and forget them if ``clear``)."""
        records = self.tracer.trace.to_records()
        if clear:
            self.tracer.trace.spans.clear()
        return records

    def parameter_rrefs(self) -> list[rpc.RRef[Any]]:
        """RRefs to this stage's parameters (for ``DistributedOptimizer``)."""
        return [rpc.RRef(p) for p in self.parameters()]

    def state(self) -> dict[str, torch.Tensor]:
        """A copy of the stage's parameters (for checking)."""
        return {k: v.detach().clone() for k, v in self.net.state_dict().items()}


def _call(rref: rpc.RRef[Any], method: str, *args: Any) -> Any:
    """Run ``rref.local_value().method(*args)`` where the object lives."""
    return getattr(rref.local_value(), method)(*args)


class SplitModel:
    """A sequential model cut into ``len(factories)`` stages on workers ``ranks``, driven from
    this process through RRefs.

    ``factories[i]`` is a picklable zero-argument callable building stage ``i`` (a module-level
    function or a ``functools.partial``), called *on its worker*: the parameters never exist on
    the driver.
    """

    def __init__(self, factories: Sequence[Callable[[], nn.Module]], ranks: Sequence[int],
                 trace: bool = False) -> None:
        if len(factories) != len(ranks):
            raise ValueError(f"{len(factories)} stages but {len(ranks)} worker ranks")
        if not factories:
            raise ValueError("a split model needs at least one stage")
        self.ranks = list(ranks)
        self.stages = [rpc.remote(worker_name(r), Stage, args=(f, i, trace))
                       for i, (f, r) in enumerate(zip(factories, ranks, strict=True))]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Stage by stage: each ``rpc_sync`` sends the activation there and brings the output
        back (distributed autograd records a send/recv pair each way)."""
        for stage in self.stages:
            x = rpc.rpc_sync(stage.owner(), _call, args=(stage, "forward", x))
        return x

    __call__ = forward

    def pipelined_forward(self, x: torch.Tensor, microbatches: int) -> torch.Tensor:
        """Micro-batches through the stages with ``rpc_async``: the first stage's output of
        micro-batch ``j`` stays on its worker (an RRef) and the next stage fetches it, so
        workers overlap different micro-batches. Equals :meth:`forward` on the whole batch."""
        if not 1 <= microbatches <= max(len(x), 1):
            raise ValueError(f"micro-batches must be between 1 and the batch size {len(x)}, "
                             f"got {microbatches}")
        futures = []
        for chunk in x.chunk(microbatches):
            ref: Any = rpc.RRef(chunk)
            for stage in self.stages[:-1]:
                ref = rpc.remote(stage.owner(), _call, args=(stage, "forward", ref))
            last = self.stages[-1]
            futures.append(rpc.rpc_async(last.owner(), _call, args=(last, "forward", ref)))
        return torch.cat(torch.futures.wait_all(futures))

    def parameter_rrefs(self) -> list[rpc.RRef[Any]]:
        """RRefs to every stage's parameters, in stage order."""
        return [p for stage in self.stages
                for p in rpc.rpc_sync(stage.owner(), _call, args=(stage, "parameter_rrefs"))]

    def state(self) -> dict[str, torch.Tensor]:
        """All parameters, fetched from the workers, named ``stage{i}.<name>``."""
        out = {}
        for i, stage in enumerate(self.stages):
            for k, v in rpc.rpc_sync(stage.owner(), _call, args=(stage, "state")).items():
                out[f"stage{i}.{k}"] = v
        return out

    def busy_s(self) -> list[float]:
        """Seconds each stage has spent computing forward passes so far."""
        return [rpc.rpc_sync(s.owner(), _get_busy, args=(s,)) for s in self.stages]

    def trace_records(self) -> list[dict[str, Any]]:
        """Every stage's spans so far (built with ``trace=True``), fetched from the workers
        and cleared there."""
        return [r for s in self.stages
                for r in rpc.rpc_sync(s.owner(), _call, args=(s, "trace_records"))]


def _get_busy(rref: rpc.RRef[Any]) -> float:
    return float(rref.local_value().busy_s)


def train_split(model: SplitModel, batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
                lr: float = 0.05, microbatches: int | None = None,
                step_times: list[float] | None = None, tracer: Tracer | None = None
                ) -> list[float]:
    """Train with distributed autograd and ``DistributedOptimizer`` (SGD); return the losses.

    Each step runs in its own distributed-autograd context: the forward (plain or pipelined)
    records the RPCs, ``dist_autograd.backward`` sends the gradients back along them, and the
    optimizer steps every stage's parameters on its own worker. The optimizer is built once
    (each worker builds its local one); ``step_times``, if given, gets each step's seconds;
    ``tracer``, if given, the driver's spans of each step (``rpc`` forward, ``compute`` loss,
    ``rpc`` backward, ``rpc`` optimizer: each the chain of remote calls it waits for).
    """
    opt = DistributedOptimizer(  # type: ignore[no-untyped-call]
        torch.optim.SGD, model.parameter_rrefs(), lr=lr)
    losses = []
    for x, y in batches:
        start = time.perf_counter()
        x, y = to_device((x, y))
        with dist_autograd.context() as ctx:
            with span(tracer, "rpc", "forward"):
                out = model.forward(x) if microbatches is None else model.pipelined_forward(
                    x, microbatches)
            with span(tracer, "compute", "loss"):
                loss = nn.functional.mse_loss(out, y)
            with span(tracer, "rpc", "backward"):
                dist_autograd.backward(ctx, [loss])  # type: ignore[attr-defined]
            with span(tracer, "rpc", "optimizer"):
                opt.step(ctx)  # type: ignore[no-untyped-call]
        losses.append(float(loss))
        if step_times is not None:
            step_times.append(time.perf_counter() - start)
    return losses


# ---- a parameter server over RPC -------------------------------------------------------------

class RpcParameterServer:
    """A synchronous parameter server (book chapter 3's idea, chapter 13's tools).

    Lives on the driver. Each round every trainer calls :meth:`push_and_pull` with its
    gradients; the call returns (asynchronously, ``@rpc.functions.async_execution``) only when
    all ``trainers`` have pushed and the averaged SGD update is applied — then everyone pulls
    the new parameters from that one reply.
    """

    def __init__(self, factory: Callable[[], nn.Module], trainers: int, lr: float) -> None:
        self.model = on_device(factory())
        self.trainers, self.lr = trainers, lr
        self.lock = threading.Lock()
        self.pending: list[list[torch.Tensor]] = []
        self.future: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
        self.rounds = 0

    def parameters(self) -> list[torch.Tensor]:
        """The current parameters (copies)."""
        return [p.detach().clone() for p in self.model.parameters()]

    @staticmethod
    @rpc.functions.async_execution  # type: ignore[untyped-decorator]
    def push_and_pull(ps_rref: rpc.RRef[Any], grads: list[torch.Tensor]
                      ) -> torch.futures.Future[list[torch.Tensor]]:
        """Add one trainer's gradients; the last of a round applies the mean and replies."""
        self = ps_rref.local_value()
        with self.lock:
            future = self.future
            self.pending.append(grads)
            if len(self.pending) == self.trainers:
                with torch.no_grad():
                    for i, p in enumerate(self.model.parameters()):
                        mean = torch.stack([g[i] for g in self.pending]).mean(0)
                        p.sub_(self.lr * mean)
                self.pending, self.future = [], torch.futures.Future()
                self.rounds += 1
                future.set_result(self.parameters())
        return cast("torch.futures.Future[list[torch.Tensor]]", future)


def _ps_parameters(ps_rref: rpc.RRef[Any]) -> list[torch.Tensor]:
    return cast(list[torch.Tensor], ps_rref.local_value().parameters())


def run_trainer(ps_rref: rpc.RRef[Any], factory: Callable[[], nn.Module],
                batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
    """A trainer: pull, compute the gradient of its batch, push-and-pull, repeat."""
    model = on_device(factory())
    params = rpc.rpc_sync(ps_rref.owner(), _ps_parameters, args=(ps_rref,))
    losses = []
    for x, y in to_device(list(batches)):
        with torch.no_grad():
            for p, new in zip(model.parameters(), params, strict=True):
                p.copy_(new)
        model.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        grads = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
                 for p in model.parameters()]
        params = rpc.rpc_sync(ps_rref.owner(), RpcParameterServer.push_and_pull,
                              args=(ps_rref, grads))
        losses.append(float(loss))
    return losses
