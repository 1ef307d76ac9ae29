"""DistributedDataParallel, simulated: gradient buckets all-reduced while backward still runs.

Twin of :mod:`backends.ddp`; book chapters 5–6; Li et al., "PyTorch Distributed: Experiences on
Accelerating Data Parallel Training", VLDB 2020, §3.2 (gradient bucketing, overlap with
backward). One training step on every rank::

    forward ─ backward layer L ─ layer L−1 ─ … ─ layer 1 ─ copy-out ─ optimizer
                       │ grads of bucket 0 ready      │ bucket k ready
                       └─ all-reduce bucket 0 ─ …  ───┴─ all-reduce bucket k     (comm thread)

* :func:`assign_buckets` — the Reducer's bucket assignment, a pure function shared with the
  real twin: parameters in *reverse* registration order (the order backward produces their
  gradients), a bucket closes once it holds ``≥ cap`` bytes; the first bucket's cap may be
  smaller (PyTorch: 1 MiB when ``bucket_cap_mb`` is left at its default, else the cap).
* :func:`gloo_ring_all_reduce` — the all-reduce gloo runs for a dense CPU tensor
  (``gloo/allreduce.cc``, the ring algorithm): the buffer is cut into ``k·p`` segments of at
  most 1 MiB (``k ≥ 2`` per rank), a ring reduce-scatter and a ring all-gather each send
  ``k(p−1)`` segments to the left neighbour, two in flight at a time (one per direction at
  ``p = 2``: see the function), reducing one segment while the next is on the wire. Bytes per
  rank ``2·n·(p−1)/p``, messages ``2·k(p−1)``.
* :class:`CoreShare` — on a host whose ranks are processes sharing ``cores`` CPU cores, the
  backward threads and the communication threads compete for them. By default processor
  sharing (every busy thread gets ``min(1, cores / demand)`` of what it asks for); given a
  measured :class:`Interference` (compute and communication speeds while both run, from a
  primitive in :mod:`lab.ddp`), those speeds instead. A GPU cluster has ``cores = inf`` and no
  such contention. Communication times come from the network model with all ``p`` ranks
  communicating, as calibrated.
* :func:`ddp_step` — the rank program of one step; :func:`predict_step` runs it and reports the
  step time, the end of backward and the *exposed* communication (what the all-reduces add
  after backward has finished).

Units: seconds, bytes, FLOP, FLOP/s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from simulator.core.comm import SimComm, SimGen, SimWork, run_spmd
from simulator.core.engine import Trace
from simulator.core.hardware import Cluster

MiB = 2**20
DEFAULT_BUCKET_CAP_BYTES = 25 * MiB
"""PyTorch's ``bucket_cap_mb=25`` (MiB, as PyTorch counts it)."""
DEFAULT_FIRST_BUCKET_BYTES = 1 * MiB
"""``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``: the first bucket's cap by default."""
GLOO_MAX_SEGMENT_BYTES = 1 * MiB
"""``gloo::AllreduceOptions::kMaxSegmentSize``: the largest message of gloo's ring."""


# ---- the Reducer's bucket assignment (shared with backends.ddp) ------------------------------

def bucket_caps(bucket_cap_mb: float | None) -> tuple[int, int]:
    """``(bucket_cap_bytes, first_bucket_bytes)`` as PyTorch derives them from ``bucket_cap_mb``.

    Left at its default (``None``) the cap is 25 MiB and the first bucket 1 MiB; a cap given
    explicitly applies to the first bucket too (``torch/nn/parallel/distributed.py``,
    ``_BucketCapacityConfig.create``).
    """
    if bucket_cap_mb is None:
        return DEFAULT_BUCKET_CAP_BYTES, DEFAULT_FIRST_BUCKET_BYTES
    if not bucket_cap_mb > 0:
        raise ValueError(f"bucket_cap_mb must be > 0, got {bucket_cap_mb}")
    cap = int(bucket_cap_mb * MiB)
    return cap, cap


def assign_buckets(param_sizes: Sequence[int], bucket_cap_bytes: int = DEFAULT_BUCKET_CAP_BYTES,
                   first_bucket_bytes: int = DEFAULT_FIRST_BUCKET_BYTES,
                   dtypes: Sequence[str] | None = None) -> list[list[int]]:
    """Group parameters into buckets, the Reducer's way; return lists of parameter indices.

    ``param_sizes[i]`` is the size in bytes of parameter ``i`` in *registration* order
    (``module.parameters()``). Parameters are taken in reverse order — the order backward
    produces their gradients — and appended to the open bucket of their dtype (a bucket is one
    flat buffer, so one dtype). A bucket closes as soon as it holds at least its cap: the first
    bucket of each dtype ``first_bucket_bytes``, later ones ``bucket_cap_bytes``. A parameter
    is never split, so a bucket may exceed its cap by less than one parameter. Buckets still
    open at the end follow, in the order their dtypes first appeared. Bucket 0 is all-reduced
    first. Example, four 1 MiB parameters, caps 2 MiB and first 1 MiB::

        assign_buckets([M, M, M, M], 2 * M, M) == [[3], [2, 1], [0]]

    Mirrors ``compute_bucket_assignment_by_size`` of ``torch/csrc/distributed/c10d/
    reducer.cpp`` as PyTorch uses it after its first iteration, when it rebuilds the buckets
    in the order gradients arrived.
    """
    if bucket_cap_bytes <= 0 or first_bucket_bytes <= 0:
        raise ValueError(f"bucket caps must be > 0 bytes, got {bucket_cap_bytes} and "
                         f"{first_bucket_bytes}")
    if dtypes is not None and len(dtypes) != len(param_sizes):
        raise ValueError(f"{len(dtypes)} dtypes for {len(param_sizes)} parameters")
    if any(size < 0 for size in param_sizes):
        raise ValueError("a parameter cannot have a negative size")
    buckets: list[list[int]] = []
    open_: dict[str, list[int]] = {}
    filled: dict[str, int] = {}
    cap: dict[str, int] = {}
    for i in reversed(range(len(param_sizes))):
        key = dtypes[i] if dtypes is not None else ""
        open_.setdefault(key, []).append(i)
        filled[key] = filled.get(key, 0) + param_sizes[i]
        if filled[key] >= cap.setdefault(key, first_bucket_bytes):
            buckets.append(open_.pop(key))
            filled[key], cap[key] = 0, bucket_cap_bytes
    buckets += [b for b in open_.values() if b]
    return buckets


# ---- the workload: what backward computes, layer by layer ------------------------------------

@dataclass(frozen=True)
class Layer:
    """One layer of the model, with its parameters and its compute times on one free core.

    Attributes:
        name: e.g. ``"fc3"``.
        param_bytes: sizes of the layer's trainable parameters, registration order, bytes.
        forward_s: forward time, s.
        backward_s: backward time (its gradients and its input's gradient), s.
    """

    name: str
    param_bytes: tuple[int, ...]
    forward_s: float
    backward_s: float


@dataclass(frozen=True)
class Workload:
    """A model as the simulator sees it: layers in forward order, float32 parameters."""

    layers: tuple[Layer, ...]
    batch: int = 0

    @property
    def param_sizes(self) -> list[int]:
        """Every parameter's size, registration order, bytes."""
        return [b for layer in self.layers for b in layer.param_bytes]

    @property
    def param_bytes(self) -> int:
        """All parameters, bytes."""
        return sum(self.param_sizes)

    @property
    def compute_s(self) -> float:
        """Forward plus backward on one free core, s."""
        return sum(layer.forward_s + layer.backward_s for layer in self.layers)


def mlp_workload(widths: Sequence[int], batch: int, flops_per_s: float,
                 itemsize: int = 4) -> Workload:
    """A multi-layer perceptron ``widths[0] → widths[1] → …`` priced by its FLOPs.

    A ``Linear(a, b)`` on a batch of ``B`` costs ``2·B·a·b`` FLOP forward and twice that
    backward (the weight gradient and the input gradient), except the first layer, whose input
    needs no gradient (Kaplan et al. 2020, "C ≈ 6N" per token). ``flops_per_s`` is one core's
    rate.
    """
    if len(widths) < 2 or min(widths) < 1 or batch < 1 or not flops_per_s > 0:
        raise ValueError("an MLP needs at least two widths ≥ 1, a batch ≥ 1 and FLOP/s > 0")
    layers = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        fwd = 2.0 * batch * a * b
        bwd = fwd * (1 if i == 0 else 2)
        layers.append(Layer(f"fc{i}", (a * b * itemsize, b * itemsize), fwd / flops_per_s,
                            bwd / flops_per_s))
    return Workload(tuple(layers), batch)


# ---- gloo's all-reduce -----------------------------------------------------------------------

def gloo_segments(nbytes: int, p: int, itemsize: int = 4,
                  max_segment_bytes: int = GLOO_MAX_SEGMENT_BYTES) -> list[int]:
    """Byte length of each of the ``k·p`` segments gloo's ring cuts ``nbytes`` into.

    ``segment = min(⌈n / 2p⌉, max)`` rounded up to whole elements; ``k·p`` segments with
    ``k ≥ 2``, so the last ones may be short or empty.
    """
    seg = min(-(-nbytes // (2 * p)), max_segment_bytes // itemsize * itemsize)
    seg = max(itemsize, -(-seg // itemsize) * itemsize)
    count = -(-max(-(-nbytes // seg), 2 * p) // p) * p
    return [max(0, min(seg, nbytes - i * seg)) for i in range(count)]


def gloo_ring_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4, tag: int = 0,
                         max_segment_bytes: int = GLOO_MAX_SEGMENT_BYTES) -> SimGen:
    """Gloo's segmented ring all-reduce (``gloo/allreduce.cc``), two segments in flight.

    Reduce-scatter: in iteration ``i`` rank ``r`` sends segment ``(r+1)·k + i`` to ``r−1`` and
    receives segment ``(r+2)·k + i`` from ``r+1``; it waits for iteration ``i−2``'s pair and
    reduces what arrived. All-gather: the same with ``r·k + i`` and ``(r+1)·k + i``, no
    reduction. Empty segments are not sent.

    A segment moves only once its receiver is ready for it: gloo's TCP transport sends an
    unbound buffer after the peer's *receive-ready* notice has arrived
    (``gloo/transport/tcp/pair.cc``, ``Pair::send`` waits for ``shiftRemotePendingRecv``).
    The notice for segment ``i`` is posted with the receive, and travels in the receiver's
    TCP stream to the sender. With ``p ≥ 3`` that direction carries no segments (a rank
    sends segments to its left neighbour, notices to its right one): the notice is a tiny
    message, there before the segment ahead has left, and two segments stay in flight. With
    ``p = 2`` the left and the right neighbour are the same peer, so the notice queues in
    the stream behind the peer's own segment ``i−1`` and reaches this rank only after it:
    segment ``i`` leaves once segment ``i−1`` from the peer has arrived — one segment in
    flight per direction, each paying its latency on its own.
    """
    p, r = comm.world_size, comm.rank
    if p == 1 or nbytes == 0:
        return
    sizes = gloo_segments(nbytes, p, itemsize, max_segment_bytes)
    n, k = len(sizes), len(sizes) // p
    left, right = (r - 1) % p, (r + 1) % p

    def after(ahead: list[SimWork], out: int) -> SimGen:  # p = 2: once the notice is in
        for work in ahead:
            yield work.wait()
        yield comm.isend(left, out, tag).wait()

    for first_send, first_recv, reduce in ((r + 1, r + 2, True), (r, r + 1, False)):
        pending: list[tuple[SimWork | None, SimWork | None, int]] = []
        for i in range(k * (p - 1) + 2):
            if i >= 2:
                recv, send, got = pending[i - 2]
                if recv is not None:
                    yield recv.wait()
                    if reduce:
                        yield from comm.reduce(got)
                if send is not None:
                    yield send.wait()
            if i < k * (p - 1):
                out, into = sizes[(first_send * k + i) % n], sizes[(first_recv * k + i) % n]
                recv_work = comm.irecv(right, into, tag) if into else None
                ahead = [w for w in pending[i - 1][:2] if w is not None] if (
                    p == 2 and i >= 1) else []
                if not out:
                    send_work = None
                elif not ahead:
                    send_work = comm.isend(left, out, tag)
                else:
                    send_work = SimWork(comm.env.process(after(ahead, out)))
                pending.append((recv_work, send_work, into))


def waited_gloo_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Gloo's segmented ring all-reduce (the ``2·k·p`` segments of
    :func:`gloo_segments`, reduce-scatter then all-gather) with every received
    segment a blocking wait of its own.

    :func:`gloo_ring_all_reduce` keeps two segments in flight, so on an idle link half of
    the latencies overlap. On this host the latency of a tiny message is a *wake-up*
    (measured by ``lab.tensor_parallel.ring_steps``): gloo's worker thread sleeps on each
    segment and is woken when it arrives, and those wake-ups do not overlap. The all-reduce probe of
    ``benchmarks/tensor_parallel_accuracy.py`` says so: an 8 KB all-reduce (4 segments per
    rank at ``p = 2``, 12 at ``p = 4``) costs about 4 and 12 waits, not 2 and 6."""
    p, r = comm.world_size, comm.rank
    if p == 1 or nbytes == 0:
        return
    sizes = gloo_segments(nbytes, p, itemsize)
    n, k = len(sizes), len(sizes) // p
    left, right = (r - 1) % p, (r + 1) % p
    for first_send, first_recv, reduce in ((r + 1, r + 2, True), (r, r + 1, False)):
        sends = []
        for i in range(k * (p - 1)):
            out, into = sizes[(first_send * k + i) % n], sizes[(first_recv * k + i) % n]
            recv = comm.irecv(right, into) if into else None
            if out:
                sends.append(comm.isend(left, out))
            if recv is not None:
                yield recv.wait()
                if reduce:
                    yield from comm.reduce(into)
        for send in sends:
            yield send.wait()

def all_reduce_time(cluster: Cluster, nbytes: int, itemsize: int = 4) -> float:
    """Makespan of :func:`gloo_ring_all_reduce` of ``nbytes`` alone on ``cluster``, s."""
    return run_spmd(cluster, gloo_ring_all_reduce, nbytes, itemsize, trace=False).makespan_s


# ---- cores shared by compute and communication threads ---------------------------------------

class _Job:
    __slots__ = ("done", "kind", "rate", "remaining")

    def __init__(self, kind: str, seconds: float, done: simpy.Event) -> None:
        self.kind, self.remaining, self.done, self.rate = kind, seconds, done, 0.0


@dataclass(frozen=True)
class Interference:
    """Measured speeds of compute and communication while both run, on every rank at once.

    Each is relative to the same work running without the other (every rank still doing it):
    ``compute = 0.5`` means a backward thread goes half as fast while its rank communicates.
    :mod:`lab.ddp` measures both on a primitive — matmuls on the main thread while a second
    thread exchanges messages with a partner rank — because on a shared host they are more
    than processor sharing predicts (caches, memory bandwidth, the scheduler).
    """

    compute: float = 1.0
    comm: float = 1.0

    def __post_init__(self) -> None:
        if not (0 < self.compute <= 1.5 and 0 < self.comm <= 1.5):
            raise ValueError(f"interference speeds must be in (0, 1.5], got {self}")


class CoreShare:
    """Processor sharing of one host's ``cores`` among busy threads (Kleinrock 1967).

    :meth:`run` spends ``seconds`` of work that takes that long when its thread gets all the
    CPU it asks for. A compute thread asks for a whole core; a communication thread asks for
    ``comm_demand`` cores — a rank waiting for bytes on a socket sleeps, so while it
    communicates its process keeps only part of a core busy (:mod:`lab.ddp` measures the share
    during point-to-point exchanges). When the busy threads ask for ``D`` cores in all, each
    progresses at ``min(1, cores / D)`` of its own speed.

    Communication times calibrated with all ``ranks`` communicating at once already had their
    share of the cores in them: :attr:`comm_share` turns them back into one unimpeded
    thread's.

    Given a measured :class:`Interference`, it replaces processor sharing between the two
    kinds: compute threads share the cores among themselves and, while any communication runs,
    go at ``interference.compute`` of that; communication goes at ``interference.comm`` of its
    calibrated speed while any compute runs.
    """

    def __init__(self, env: simpy.Environment, cores: float = math.inf, ranks: int = 1,
                 comm_demand: float = 1.0, interference: Interference | None = None) -> None:
        if not cores > 0:
            raise ValueError(f"a host needs cores > 0, got {cores}")
        if not comm_demand > 0:
            raise ValueError(f"a communication thread asks for > 0 cores, got {comm_demand}")
        self.env, self.cores, self.comm_demand = env, cores, comm_demand
        self.interference = interference
        self.comm_share = min(1.0, cores / (max(ranks, 1) * comm_demand))
        self._jobs: list[_Job] = []
        self._last = 0.0
        self._version = 0

    def run(self, seconds: float, kind: str = "compute") -> Generator[simpy.Event, Any, None]:
        """Do ``seconds`` of ``kind`` (``compute`` or ``comm``) work (a process body)."""
        if seconds <= 0:
            return
        if math.isinf(self.cores) and self.interference is None:  # nothing shared: a delay
            yield self.env.timeout(seconds)
            return
        job = _Job(kind, seconds, self.env.event())
        self._advance()
        self._jobs.append(job)
        self._reschedule()
        yield job.done

    def _advance(self) -> None:
        elapsed = self.env.now - self._last
        for job in self._jobs:
            job.remaining -= job.rate * elapsed
        self._last = self.env.now

    def _reschedule(self) -> None:
        if self.interference is not None:
            computing = sum(j.kind == "compute" for j in self._jobs)
            both = 0 < computing < len(self._jobs)
            compute = min(1.0, self.cores / max(computing, 1))
            compute *= self.interference.compute if both else 1.0
            comm = self.interference.comm if both else 1.0
            for job in self._jobs:
                job.rate = compute if job.kind == "compute" else comm
        else:
            demand = sum(1.0 if j.kind == "compute" else self.comm_demand for j in self._jobs)
            share = min(1.0, self.cores / max(demand, 1e-300))
            for job in self._jobs:
                job.rate = share if job.kind == "compute" else min(1.0, share / self.comm_share)
        self._version += 1
        if self._jobs:
            dt = min(max(j.remaining, 0.0) / j.rate for j in self._jobs)
            self.env.process(self._wake(dt, self._version))

    def _wake(self, dt: float, version: int) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(dt)
        if version != self._version:
            return
        self._advance()
        done = [j for j in self._jobs if j.remaining <= 1e-12 * max(1.0, j.rate)]
        self._jobs = [j for j in self._jobs if j not in done]
        for job in done:
            job.done.succeed()
        self._reschedule()


# ---- one DDP step ----------------------------------------------------------------------------

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

