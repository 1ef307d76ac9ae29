"""One Horovod training step, simulated: backward, the background thread's cycles, the step.

Twin of :mod:`backends.horovod` (the engine and ``DistributedOptimizer``); book chapter 7,
"The background thread", "Background-thread architecture"; Sergeev & Del Balso 2018; Horovod
``horovod/common/operations.cc`` (``RunLoopOnce``, ``PerformOperation``) and ``controller.cc``
(``ComputeResponseList``). Every rank runs two threads::

    main        forward ─ backward fcL ─ fcL−1 ─ … ─ fc0 ─ synchronize ─ optimizer
                        enqueue ↑ gradients of each layer (a request per tensor)
    background  N ▒▒ N ▒▒ N [copy-in · all-reduce · copy-out] N [ … ] …     (every c s)

* the **main thread** runs forward and backward layer by layer (a one-process profile,
  :class:`simulator.ddp.Workload`); each parameter's gradient, once ready, is *enqueued*
  (``DistributedOptimizer``'s hook → ``allreduce_async_``); ``step()`` first *synchronizes*
  (waits for every handle), then runs the optimizer;
* the **background thread** loops (:func:`background_loop`): sleep until ``cycle_time`` has
  passed since the previous cycle began; pop the tensor queue; **negotiate** — with the
  response cache, one all-reduce of a bit vector among all ranks (``negotiation_s``); the tensors
  ready on *every* rank become responses, in the agreed order, fused by
  :func:`~simulator.horovod.fusion.fuse_responses`; **perform** each: a response of several
  tensors is copied into the fusion buffer, all-reduced, and copied out; a single tensor is
  reduced in place; the handles complete.

A collective starts when the last rank reaches it (the ranks meet at every negotiation, so
their cycles stay aligned). Its duration is its time alone on the network model
(:class:`HorovodCosts`); on a host whose ranks share CPU cores, every thread's work — backward,
copies, the background thread's communication — runs on :class:`simulator.ddp.CoreShare`, so
four ranks with eight busy threads on two cores are slowed as measured, not hidden.

Units: seconds, bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.ddp import CoreShare, Interference, Workload, gloo_ring_all_reduce
from simulator.horovod.fusion import Response, fuse_responses

MiB = 2**20
DEFAULT_FUSION_THRESHOLD_BYTES = 128 * MiB
"""``HOROVOD_FUSION_THRESHOLD``'s default in recent releases (64 MiB in the paper)."""
DEFAULT_CYCLE_TIME_S = 1e-3
"""``HOROVOD_CYCLE_TIME``'s default in recent releases, 1 ms (5 ms in the first ones)."""
CACHE_CAPACITY = 1024
"""``HOROVOD_CACHE_CAPACITY``'s default: bits in the negotiation's bit vector."""


AllReduceProgram = Callable[..., SimGen]
"""A rank program ``(comm, nbytes, itemsize)`` that all-reduces ``nbytes`` (e.g.
:func:`simulator.ddp.gloo_ring_all_reduce`, :func:`simulator.ddp.waited_gloo_all_reduce`)."""
NEGOTIATION_ITEMSIZE = 8
"""The negotiation's bit vector is int64 words: gloo cuts it into 8-byte elements."""


@dataclass(frozen=True)
class HorovodSettings:
    """The knobs of the background thread.

    Attributes:
        fusion_threshold_bytes: largest fused response, bytes (0: no fusion).
        cycle_time_s: shortest time between the starts of two cycles, s.
    """

    fusion_threshold_bytes: int = DEFAULT_FUSION_THRESHOLD_BYTES
    cycle_time_s: float = DEFAULT_CYCLE_TIME_S

    def __post_init__(self) -> None:
        if self.fusion_threshold_bytes < 0:
            raise ValueError(f"the fusion threshold must be ≥ 0 bytes, got "
                             f"{self.fusion_threshold_bytes}")
        if not (self.cycle_time_s >= 0 and math.isfinite(self.cycle_time_s)):
            raise ValueError(f"the cycle time must be a finite number ≥ 0 s, got "
                             f"{self.cycle_time_s}")


@dataclass(frozen=True)
class HorovodCosts:
    """What each piece of the engine costs on one machine, alone (s, bytes/s).

    Two kinds of communication behave differently on a host whose ranks share CPU cores.
    *Bandwidth-bound* all-reduces keep the ranks' cores busy copying bytes: they run as
    communication on :class:`simulator.ddp.CoreShare` (slowed while backward computes, and
    slowing it). *Latency-bound* ones — the negotiation's bit vector, a bias's all-reduce — are
    a chain of tiny messages whose ranks mostly sleep in a receive: a wait that takes no core,
    but each hop's receiver must be woken, which costs far more while the main threads compute
    (``*_busy_s``: priced by a primitive measured beside computing threads).

    Attributes:
        all_reduce_s: one bandwidth-bound all-reduce of ``n`` bytes, nothing else running.
        negotiation_s: one negotiation (the response cache's bit-vector all-reduce), the main
            threads idle.
        memcpy_Bps: copy rate into and out of the fusion buffer (``inf``: free).
        scale_Bps: rate of the averaging pass (``Average``: divide by ``p`` in place) over each
            reduced response (``inf``: none).
        optimizer_Bps: bytes of parameters the optimizer step updates per second (``inf``:
            free).
        enqueue_s: the main thread's cost of enqueuing one request.
        negotiation_busy_s: a negotiation while the main threads compute (``None``: as idle).
        small_bytes: all-reduces of fewer bytes are latency-bound (0: none is).
        small_all_reduce_s: a latency-bound all-reduce of ``n`` bytes, the main threads idle.
        small_all_reduce_busy_s: the same while they compute (``None``: as idle).
        cycle_cpu_s: the CPU one cycle of the background thread keeps busy besides its
            waits — the engine's bookkeeping and the negotiation's calls, on every rank — run
            on the shared cores like compute, s (0: free).
    """

    all_reduce_s: Callable[[int], float]
    negotiation_s: float
    memcpy_Bps: float = math.inf
    scale_Bps: float = math.inf
    optimizer_Bps: float = math.inf
    enqueue_s: float = 0.0
    negotiation_busy_s: float | None = None
    small_bytes: int = 0
    small_all_reduce_s: Callable[[int], float] | None = None
    small_all_reduce_busy_s: Callable[[int], float] | None = None
    cycle_cpu_s: float = 0.0

    def all_reduce(self, nbytes: int, busy: bool) -> tuple[float, bool]:
        """One all-reduce of ``nbytes``, started while the main threads compute (``busy``) or
        not: ``(seconds, latency_bound)``."""
        if nbytes < self.small_bytes and self.small_all_reduce_s is not None:
            small = (self.small_all_reduce_busy_s if busy and self.small_all_reduce_busy_s
                     is not None else self.small_all_reduce_s)
            return small(nbytes), True
        return self.all_reduce_s(nbytes), False

    def negotiation(self, busy: bool) -> float:
        """One negotiation, started while the main threads compute or not, s."""
        if busy and self.negotiation_busy_s is not None:
            return self.negotiation_busy_s
        return self.negotiation_s

    @classmethod
    def on(cls, cluster: Cluster, negotiation_bytes: int = CACHE_CAPACITY // 8,
           small_cluster: Cluster | None = None, small_busy_cluster: Cluster | None = None,
           small_bytes: int = 0, small_program: AllReduceProgram = gloo_ring_all_reduce,
           small_busy_program: AllReduceProgram = gloo_ring_all_reduce,
           **overrides: float) -> HorovodCosts:
        """The costs on ``cluster``: gloo's ring all-reduce (:func:`simulator.ddp.
        gloo_ring_all_reduce`, memoised per size) for the fused responses; ``small_program``
        (default the same) on ``small_cluster`` (default: ``cluster``) for the bit vector
        (``negotiation_bytes`` of int64 words) and for all-reduces under ``small_bytes``, and
        ``small_busy_program`` on ``small_busy_cluster`` for both while the main threads
        compute; the device's copy rate for the fusion buffer and for the averaging pass
        (one read and one write per byte, like a copy) and its reduction rate for the
        optimizer (SGD, ``p −= lr·g``: one pass)."""
        dev = cluster.devices[0]
        small = _all_reduce_memo(small_cluster or cluster, small_program)
        words = _all_reduce_memo(small_cluster or cluster, small_program, NEGOTIATION_ITEMSIZE)
        values: dict[str, Any] = {
            "negotiation_s": words(negotiation_bytes), "memcpy_Bps": dev.memcpy_Bps,
            "scale_Bps": dev.memcpy_Bps, "optimizer_Bps": dev.reduce_Bps,
            "small_bytes": small_bytes, "small_all_reduce_s": small}
        if small_busy_cluster is not None:
            busy = _all_reduce_memo(small_busy_cluster, small_busy_program)
            values["negotiation_busy_s"] = _all_reduce_memo(
                small_busy_cluster, small_busy_program, NEGOTIATION_ITEMSIZE)(negotiation_bytes)
            values["small_all_reduce_busy_s"] = busy
        values.update(overrides)
        return cls(_all_reduce_memo(cluster), **values)


def _all_reduce_memo(cluster: Cluster, program: AllReduceProgram = gloo_ring_all_reduce,
                     itemsize: int = 4) -> Callable[[int], float]:
    """The makespan of ``program`` all-reducing ``n`` bytes alone on ``cluster``, memoised
    per size (0 on one rank), s."""
    memo: dict[int, float] = {}

    def all_reduce_s(nbytes: int) -> float:
        if cluster.world_size == 1:
            return 0.0
        if nbytes not in memo:
            memo[nbytes] = run_spmd(cluster, program, nbytes, itemsize,
                                    trace=False).makespan_s
        return memo[nbytes]

    return all_reduce_s


@dataclass
class _Controller:
    """What every rank of one simulated step shares: the host's cores, the tensor queues,
    what each rank has popped, the agreed responses of each cycle, and collective arrivals."""

    env: simpy.Environment
    host: CoreShare
    world_size: int
    tensors: list[Response]
    threshold: int
    queues: list[list[int]] = field(default_factory=list)
    popped: list[set[int]] = field(default_factory=list)
    agreed: set[int] = field(default_factory=set)
    responses: dict[int, list[list[int]]] = field(default_factory=dict)
    arrived: dict[tuple[object, ...], int] = field(default_factory=dict)
    starts: dict[tuple[object, ...], simpy.Event] = field(default_factory=dict)
    order: dict[int, int] = field(default_factory=dict)
    computing: int = 0
    """Main threads in forward or backward right now, all ranks."""

    def enqueue(self, rank: int, tensor: int) -> None:
        """``allreduce_async_``: a request for ``tensor`` joins ``rank``'s tensor queue; the
        first request of a tensor fixes its place in the agreed order (the response cache
        keeps the order in which tensors first became ready)."""
        self.queues[rank].append(tensor)
        self.order.setdefault(tensor, len(self.order))

    def join(self, key: tuple[object, ...]) -> simpy.Event:
        """A collective starts when the last rank reaches it: this rank arrives at it."""
        event = self.starts.setdefault(key, self.env.event())
        self.arrived[key] = self.arrived.get(key, 0) + 1
        if self.arrived[key] == self.world_size:
            event.succeed()
        return event

    def compute_response_list(self, cycle: int) -> list[list[int]]:
        """The fused responses of ``cycle`` (computed once, the same on every rank): tensors
        popped by every rank and not yet agreed, in request order, fused."""
        if cycle not in self.responses:
            ready = sorted(set.intersection(*self.popped) - self.agreed, key=self.order.__getitem__)
            self.agreed.update(ready)
            groups = fuse_responses([self.tensors[i] for i in ready], self.threshold)
            index = {id(t): i for i, t in enumerate(self.tensors)}
            self.responses[cycle] = [[index[id(r)] for r in g] for g in groups]
        return self.responses[cycle]


def background_loop(comm: SimComm, ctl: _Controller, settings: HorovodSettings,
                    costs: HorovodCosts, handles: list[simpy.Event]) -> SimGen:
    """The background thread of one rank (``RunLoopOnce`` in a loop) until every handle is
    done: sleep, pop, negotiate, perform the fused responses."""
    r, host, tensors = comm.rank, ctl.host, ctl.tensors
    cycle, last_start = 0, -math.inf
    while not all(h.triggered for h in handles):
        sleep = last_start + settings.cycle_time_s - comm.now
        if sleep > 0:
            begin = comm.now
            yield comm.env.timeout(sleep)
            comm.span("WAIT", f"cycle {cycle}", begin)
        last_start = start = comm.now
        ctl.popped[r].update(ctl.queues[r])
        ctl.queues[r].clear()
        yield from host.run(costs.cycle_cpu_s)  # the engine's own work this cycle: a core
        yield ctl.join(("negotiate", cycle))
        yield comm.env.timeout(costs.negotiation(ctl.computing > 0))  # latency-bound: a wait
        comm.span("NEGOTIATE", f"cycle {cycle}", start)
        for k, group in enumerate(ctl.compute_response_list(cycle)):
            nbytes = sum(tensors[i].nbytes for i in group)
            label = f"cycle {cycle}: " + ", ".join(tensors[i].name for i in group[:3]) + (
                f" (+{len(group) - 3})" if len(group) > 3 else "")
            fused = len(group) > 1
            if fused:
                begin = comm.now
                yield from host.run(nbytes / costs.memcpy_Bps)
                comm.span("MEMCPY_IN_FUSION_BUFFER", label, begin, nbytes)
            begin = comm.now
            yield ctl.join(("allreduce", cycle, k))
            seconds, latency_bound = costs.all_reduce(nbytes, ctl.computing > 0)
            if latency_bound:
                yield comm.env.timeout(seconds)
            else:
                yield from host.run(seconds, "comm")
            yield from host.run(nbytes / costs.scale_Bps)
            comm.span("ALLREDUCE", label, begin, nbytes)
            if fused:
                begin = comm.now
                yield from host.run(nbytes / costs.memcpy_Bps)
                comm.span("MEMCPY_OUT_FUSION_BUFFER", label, begin, nbytes)
            for i in group:
                handles[i].succeed()
        cycle += 1


def horovod_step(comm: SimComm, workload: Workload, ctl: _Controller,
                 settings: HorovodSettings, costs: HorovodCosts) -> SimGen:
    """One training step of one rank: the main thread, with its background thread beside."""
    env, host = comm.env, ctl.host
    handles = [env.event() for _ in ctl.tensors]
    background = env.process(background_loop(comm, ctl, settings, costs, handles))
    ctl.computing += 1  # forward and backward: the main thread keeps a core busy
    start = comm.now
    for layer in workload.layers:
        yield from host.run(layer.forward_s)
    comm.span("compute", "forward", start)
    first = [0]
    for layer in workload.layers:
        first.append(first[-1] + len(layer.param_bytes))
    for index in reversed(range(len(workload.layers))):
        layer, start = workload.layers[index], comm.now
        yield from host.run(layer.backward_s)
        comm.span("compute", f"backward {layer.name}", start)
        for i in reversed(range(first[index], first[index + 1])):
            yield from host.run(costs.enqueue_s)
            ctl.enqueue(comm.rank, i)
            comm.span("ENQUEUE", ctl.tensors[i].name, comm.now, ctl.tensors[i].nbytes)
    ctl.computing -= 1
    start = comm.now
    yield env.all_of(handles)
    comm.span("wait", "synchronize", start)
    start = comm.now
    yield from host.run(workload.param_bytes / costs.optimizer_Bps)
    comm.span("compute", "optimizer", start, workload.param_bytes)
    yield background


@dataclass(frozen=True)
class HorovodPrediction:
    """A simulated Horovod step (times in s from the start of forward).

    Attributes:
        step_s: forward to the end of the optimizer step, slowest rank.
        backward_end_s: when the last layer's backward finished (latest rank).
        exposed_comm_s: how long ranks waited in ``synchronize`` (slowest rank): the
            communication that overlapping with backward did not hide.
        cycles: background-thread cycles rank 0 ran during the step.
        fused_bytes: the size of each fused all-reduce, in order, bytes.
        trace: every rank's spans, named as the real engine names them: the main thread's
            ``compute`` (forward, backward per layer, optimizer) and ``wait`` (synchronize);
            an instant ``ENQUEUE`` per request (name: the tensor's); the background thread's
            ``WAIT`` (its sleep), ``NEGOTIATE`` (``"cycle N"``),
            ``MEMCPY_IN_FUSION_BUFFER``, ``ALLREDUCE`` (with the averaging pass),
            ``MEMCPY_OUT_FUSION_BUFFER`` (``"cycle N: tensor names"``).
    """

    step_s: float
    backward_end_s: float
    exposed_comm_s: float
    cycles: int
    fused_bytes: list[int]
    trace: Trace

    @property
    def all_reduces(self) -> int:
        """Fused all-reduces per step."""
        return len(self.fused_bytes)


def tensor_names(workload: Workload) -> list[Response]:
    """One request per parameter, registration order, named as ``DistributedOptimizer``
    names them (``allreduce.fc1.weight``, ``allreduce.fc1.bias``; ``.0``, ``.1`` … for
    layers with other than two parameters)."""
    out = []
    for layer in workload.layers:
        suffixes = ("weight", "bias") if len(layer.param_bytes) == 2 else tuple(
            str(j) for j in range(len(layer.param_bytes)))
        out += [Response(f"allreduce.{layer.name}.{suffix}", nbytes)
                for suffix, nbytes in zip(suffixes, layer.param_bytes, strict=True)]
    return out


def predict_step(cluster: Cluster, workload: Workload,
                 settings: HorovodSettings = HorovodSettings(),
                 costs: HorovodCosts | None = None, cores: float = math.inf,
                 comm_demand: float = 1.0,
                 interference: Interference | None = None) -> HorovodPrediction:
    """Simulate one Horovod step of ``workload`` on ``cluster``.

    Args:
        cluster: the ranks and their network (``cluster_from_entry`` for this machine).
        workload: the model, with per-layer times on one free core.
        settings: fusion threshold and cycle time.
        costs: the engine's costs (default :meth:`HorovodCosts.on` the cluster).
        cores: CPU cores the ranks share (``inf``: one device each, no sharing).
        comm_demand: cores a rank's communication keeps busy (see :class:`CoreShare`).
        interference: measured speeds of compute and communication while both run.
    """
    costs = costs or HorovodCosts.on(cluster)
    if settings.cycle_time_s == 0 and costs.negotiation_s == 0:
        raise ValueError("a cycle time of 0 with a free negotiation would spin for ever; "
                         "give a cycle time > 0")
    tensors = tensor_names(workload)
    p = cluster.world_size
    holder: list[_Controller] = []

    def program(comm: SimComm) -> SimGen:
        if not holder:
            host = CoreShare(comm.env, cores, p, comm_demand, interference)
            holder.append(_Controller(comm.env, host, p, tensors,
                                      settings.fusion_threshold_bytes,
                                      [[] for _ in range(p)], [set() for _ in range(p)]))
        yield from horovod_step(comm, workload, holder[0], settings, costs)

    result = run_spmd(cluster, program)
    trace = result.trace
    backward_end = max((s.end for s in trace if s.name.startswith("backward")), default=0.0)
    waits = [s.duration for s in trace if s.kind == "wait"]
    cycles = sum(1 for s in trace.for_rank(0) if s.kind == "NEGOTIATE")
    fused = [s.nbytes for s in trace.for_rank(0) if s.kind == "ALLREDUCE"]
    return HorovodPrediction(result.makespan_s, backward_end, max(waits, default=0.0), cycles,
                             fused, trace)
