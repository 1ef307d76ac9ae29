"""One DDP step: backward with bucketed all-reduces on a communication thread, then the step.

:func:`ddp_step` is the rank program of one step; :func:`predict_step` runs it on every rank
of a cluster and reports the step time, the end of backward and the *exposed* communication
(what the all-reduces add after backward has finished).

Units: seconds, bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import simpy

from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.ddp.buckets import DEFAULT_BUCKET_CAP_BYTES, assign_buckets
from simulator.ddp.cores import CoreShare, Interference
from simulator.ddp.gloo import all_reduce_time
from simulator.ddp.workload import Workload


@dataclass
class _Shared:
    """What every rank of one simulated step shares: the host's cores, collective arrivals."""

    host: CoreShare
    arrived: dict[int, int]
    start: dict[int, simpy.Event]
    world_size: int

    def join(self, env: simpy.Environment, bucket: int) -> simpy.Event:
        """A collective starts when the last rank launches it: this rank arrives at it."""
        event = self.start.setdefault(bucket, env.event())
        self.arrived[bucket] = self.arrived.get(bucket, 0) + 1
        if self.arrived[bucket] == self.world_size:
            event.succeed()
        return event


def ddp_step(comm: SimComm, workload: Workload, buckets: list[list[int]],
             all_reduce_s: list[float], shared: _Shared, overlap: bool = True) -> SimGen:
    """One training step of one rank: forward, backward with bucketed all-reduces, step.

    Backward runs the layers in reverse; after each, its gradients are copied into their
    bucket views (``memcpy``, scaled by 1/p as PyTorch does while copying). A bucket is ready
    when its last gradient is in; the communication thread all-reduces ready buckets strictly
    in bucket order, each as soon as it is ready and the one before has started, starting when
    every rank has launched it (``overlap=False``: only after backward). At the end the
    averaged buckets are copied back into the gradients and the optimizer (SGD:
    ``p −= lr·g``, one reduction-sized pass) updates the parameters.
    """
    env, host, dev = comm.env, shared.host, comm.device
    # Calibrated copy and reduction rates are one free core's: each timed call (a few ms) is
    # shorter than a scheduler time slice, so it seldom shares its core — lab.calibrate measures
    # the same rates at p = 4 as at p = 2 on 2 cores. The cores are shared here, by CoreShare.
    memcpy_s, reduce_s = 1 / dev.memcpy_Bps, 1 / dev.reduce_Bps
    sizes = workload.param_sizes
    owner = {i: b for b, members in enumerate(buckets) for i in members}
    missing = [len(members) for members in buckets]
    ready = [env.event() for _ in buckets]
    first, offsets = 0, []
    for layer in workload.layers:
        offsets.append(range(first, first + len(layer.param_bytes)))
        first += len(layer.param_bytes)

    def communicate() -> SimGen:
        for b, members in enumerate(buckets):
            yield ready[b]
            start = comm.now
            yield shared.join(env, b)
            yield from host.run(all_reduce_s[b], "comm")
            comm.span("allreduce", f"all-reduce bucket {b}", start,
                      sum(sizes[i] for i in members))

    start = comm.now
    for layer in workload.layers:
        yield from host.run(layer.forward_s)
    comm.span("compute", "forward", start)
    comm_thread = env.process(communicate()) if overlap and comm.world_size > 1 else None
    for index in reversed(range(len(workload.layers))):
        layer, start = workload.layers[index], comm.now
        yield from host.run(layer.backward_s)
        nbytes = sum(sizes[i] for i in offsets[index] if i in owner)
        yield from host.run(nbytes * memcpy_s)
        comm.span("compute", f"backward {layer.name}", start)
        for i in offsets[index]:
            if i in owner:
                b = owner[i]
                missing[b] -= 1
                if missing[b] == 0:
                    ready[b].succeed()
                    comm.span("ready", f"bucket {b} ready", comm.now)
    if comm.world_size > 1:
        if comm_thread is None:
            comm_thread = env.process(communicate())
        wait = comm.now
        yield comm_thread
        comm.span("wait", "wait for all-reduces", wait)
    start = comm.now
    total = sum(sizes[i] for i in owner)
    yield from host.run(total * (memcpy_s + reduce_s))
    comm.span("compute", "copy-out + optimizer", start, total)


@dataclass(frozen=True)
class DDPPrediction:
    """A simulated DDP step (times in s).

    Attributes:
        step_s: forward to the end of the optimizer step, slowest rank.
        backward_end_s: when the last layer's backward finished.
        exposed_comm_s: how long ranks waited for all-reduces after backward: the part of
            communication that overlap did not hide.
        buckets: the bucket assignment (parameter indices).
        bucket_bytes: each bucket's size, bytes.
        all_reduce_s: each bucket's all-reduce alone (calibrated network, nothing else busy).
        trace: the spans of every rank.
    """

    step_s: float
    backward_end_s: float
    exposed_comm_s: float
    buckets: list[list[int]]
    bucket_bytes: list[int]
    all_reduce_s: list[float]
    trace: Trace


def predict_step(cluster: Cluster, workload: Workload,
                 bucket_cap_bytes: int = DEFAULT_BUCKET_CAP_BYTES,
                 first_bucket_bytes: int | None = None, overlap: bool = True,
                 cores: float = math.inf, comm_demand: float = 1.0,
                 interference: Interference | None = None,
                 all_reduce: Callable[[Cluster, int], float] = all_reduce_time) -> DDPPrediction:
    """Simulate one DDP step of ``workload`` on ``cluster``.

    Args:
        cluster: the ranks and their network (``local_host_cluster`` for this machine).
        workload: the model, with per-layer times on one free core.
        bucket_cap_bytes: the Reducer's cap, bytes.
        first_bucket_bytes: the first bucket's cap (``None``: the same as the cap, which is
            what PyTorch does when ``bucket_cap_mb`` is given).
        overlap: all-reduce while backward runs (DDP) or only after it.
        cores: CPU cores the ranks share (``inf``: one device each, no sharing).
        comm_demand: cores a rank's communication keeps busy (see :class:`CoreShare`).
        interference: measured speeds of compute and communication while both run (replaces
            processor sharing between them).
        all_reduce: the time of one all-reduce alone, ``(cluster, nbytes) -> s``.
    """
    buckets = assign_buckets(workload.param_sizes, bucket_cap_bytes,
                             first_bucket_bytes or bucket_cap_bytes)
    sizes = workload.param_sizes
    bucket_bytes = [sum(sizes[i] for i in b) for b in buckets]
    times = [all_reduce(cluster, n) if cluster.world_size > 1 else 0.0 for n in bucket_bytes]
    p = cluster.world_size
    holder: list[_Shared] = []

    def program(comm: SimComm) -> SimGen:
        if not holder:
            host = CoreShare(comm.env, cores, p, comm_demand, interference)
            holder.append(_Shared(host, {}, {}, p))
        yield from ddp_step(comm, workload, buckets, times, holder[0], overlap)

    result = run_spmd(cluster, program)
    backward_end = max((s.end for s in result.trace if s.name.startswith("backward")),
                       default=0.0)
    waits = [s.duration for s in result.trace if s.kind == "wait"]
    return DDPPrediction(result.makespan_s, backward_end, max(waits, default=0.0), buckets,
                         bucket_bytes, times, result.trace)
