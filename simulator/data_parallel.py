"""DataParallel, simulated: one host thread driving replicas on the devices of a cluster.

Twin of :mod:`backends.data_parallel` (book ch. 4). ``torch.nn.DataParallel`` is *not* SPMD:
one Python thread — the host, on the first device — does every step itself, so this twin is a
single-controller SimPy model rather than a :func:`~simulator.core.comm.run_spmd` program. The
host moves bytes over the cluster's :class:`~simulator.core.network.Network` and starts one
compute process per replica. One iteration, ``k`` replicas (``k`` = chunks of the batch, by
``torch.chunk``'s rule), chunk ``i`` of ``c_i`` samples::

    step          who              cost (contention none, serial copies)
    scatter       host: 0 -> i     Σ_{i≥1} (α + c_i·s_in·β)
    replicate     host: 0 -> i     (k−1)·(α + (P + P_buf)·β)            every iteration!
    apply         replica i        max_i F(c_i)·slowdown
    gather        i -> 0           c_0·s_out/R_copy + Σ_{i≥1} (α + c_i·s_out·β)
    loss          device 0         L(b)
    backward      0 -> i, then i   Σ_{i≥1} (α + c_i·s_out·β) + max_i B(c_i)   (serial: Σ_i B(c_i))
    reduce        i -> 0, device 0 (k−1)·(α + P·β) + P·γ₁ + (k−2)·P·γ
    step          device 0         S

with ``P`` parameter bytes, ``s_in``/``s_out`` input/output bytes per sample, ``F``/``B`` the
forward/backward time of one replica on a chunk, ``R_copy`` the first device's copy rate,
γ₁ the time per byte of ``reduce_add``'s first sum (into a new tensor; γ by default).
:func:`data_parallel_step_cost` is this table; with contention ``none`` the simulation equals
it. Every byte of the replicate, gather and reduce steps crosses the *first device's* link:
that is the first-device bottleneck, ``2·(k−1)·P`` bytes per iteration, which grows with the
replica count while the compute per replica shrinks (:func:`best_replica_count`). DDP
(Li et al., VLDB 2020) instead keeps a model per process, never re-copies parameters, and
all-reduces gradients over a ring, ``2·(p−1)/p·P`` bytes per rank
(:func:`ddp_step_cost`).

Options follow what the real twin does on each kind of machine:

* ``copies="serial"``: the host copies one tensor after another (CPU; ``torch.cat``);
  ``"concurrent"``: all copies at once, as CUDA streams per device do — under ``fair``
  contention they then share the first device's port.
* ``backward="parallel"``: each device runs its replica's backward (the autograd engine has a
  thread per GPU); ``"serial"``: one thread runs them all (the CPU autograd engine).
* ``cores``: when replicas are threads on a CPU with fewer cores than replicas, ``k`` threads
  share ``cores`` cores, and each runs ``max(1, k/cores)`` times slower (processor sharing).

What PyTorch's GPU path does beyond this model: NCCL broadcast/reduce for replicate and
reduce_add (pipelined, so the first device's traffic is about ``P`` rather than ``(k−1)·P``),
and asynchronous kernels overlapping the host's next step. Units: seconds, bytes, bytes/s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import simpy

from simulator.collectives.all_reduce import ring_all_reduce_cost
from simulator.core.comm import SimResult
from simulator.core.engine import Trace
from simulator.core.hardware import A100_80GB, Cluster, Device
from simulator.core.network import Link, Network, Topology

Copies = Literal["serial", "concurrent"]
Backward = Literal["parallel", "serial"]
PHASES = ("scatter", "replicate", "apply", "gather", "loss", "backward", "reduce", "step")
"""The steps of one iteration, in order; :func:`simulate_data_parallel` reports each one's
duration."""

PCIE4 = Link(latency_s=5e-6, bandwidth_Bps=24e9)
"""A PCIe 4.0 x16 port as DataParallel sees it: about 24 GB/s each way, µs latency."""


def chunk_sizes(n: int, parts: int) -> list[int]:
    """Samples per chunk by ``torch.chunk``'s rule: ``⌈n/parts⌉`` each, the last one shorter,
    fewer chunks when the samples run out (5 into 4 → ``[2, 2, 1]``)."""
    if n < 1 or parts < 1:
        raise ValueError(f"cannot split {n} samples into {parts} chunks: both must be >= 1")
    size = -(-n // parts)
    return [min(size, n - start) for start in range(0, n, size)]


@dataclass(frozen=True)
class Workload:
    """What one iteration moves: the global batch and the sizes that cross devices (bytes)."""

    batch: int
    input_bytes_per_sample: int
    output_bytes_per_sample: int
    param_bytes: int
    buffer_bytes: int = 0

    @classmethod
    def for_mlp(cls, widths: Sequence[int], batch: int, itemsize: int = 4) -> Workload:
        """A stack of ``Linear`` layers ``widths[0] -> widths[1] -> …`` (with biases)."""
        params = sum(a * b + b for a, b in itertools.pairwise(widths))
        return cls(batch, widths[0] * itemsize, widths[-1] * itemsize, params * itemsize)


class ComputeProfile(Protocol):
    """How long one replica's work takes, s, for a chunk of ``batch`` samples."""

    def forward_s(self, batch: int) -> float: ...
    def backward_s(self, batch: int) -> float: ...
    def loss_s(self, batch: int) -> float: ...
    def step_s(self) -> float: ...


@dataclass(frozen=True)
class FlopProfile:
    """Compute from FLOPs at a device's rate: forward ``2·b·Σ(fan_in·fan_out)`` FLOPs, backward
    twice that (Kaplan et al. 2020's 6·N·D for forward plus backward); the loss and the SGD step
    are memory-bound (the step reads parameter and gradient and writes the parameter)."""

    forward_flops_per_sample: float
    output_bytes_per_sample: int
    param_bytes: int
    device: Device

    @classmethod
    def for_mlp(cls, widths: Sequence[int], device: Device, itemsize: int = 4) -> FlopProfile:
        """The profile of :meth:`Workload.for_mlp`'s model on ``device``."""
        macs = sum(a * b for a, b in itertools.pairwise(widths))
        params = sum(a * b + b for a, b in itertools.pairwise(widths))
        return cls(2.0 * macs, widths[-1] * itemsize, params * itemsize, device)

    def forward_s(self, batch: int) -> float:
        return batch * self.forward_flops_per_sample / self.device.flops_per_s

    def backward_s(self, batch: int) -> float:
        return 2 * self.forward_s(batch)

    def loss_s(self, batch: int) -> float:
        return batch * self.output_bytes_per_sample / self.device.memcpy_Bps

    def step_s(self) -> float:
        return 3 * self.param_bytes / self.device.mem_bandwidth_Bps


@dataclass(frozen=True)
class TableProfile:
    """Compute measured on one thread at a few chunk sizes (a primitive of :mod:`lab`), linearly
    interpolated between them (and extrapolated from the nearest two)."""

    batches: tuple[int, ...]
    forward: tuple[float, ...]
    backward: tuple[float, ...]
    loss: tuple[float, ...]
    step: float

    def __post_init__(self) -> None:
        n = len(self.batches)
        if n < 1 or any(len(t) != n for t in (self.forward, self.backward, self.loss)):
            raise ValueError("a table profile needs one time per batch size in every column")
        if list(self.batches) != sorted(set(self.batches)):
            raise ValueError(f"batch sizes must be increasing, got {self.batches}")

    def _at(self, column: tuple[float, ...], batch: int) -> float:
        xs = self.batches
        if len(xs) == 1:
            return column[0] * batch / xs[0]
        i = min(max(1, next((j for j, x in enumerate(xs) if x >= batch), len(xs) - 1)),
                len(xs) - 1)
        x0, x1, y0, y1 = xs[i - 1], xs[i], column[i - 1], column[i]
        return max(0.0, y0 + (y1 - y0) * (batch - x0) / (x1 - x0))

    def forward_s(self, batch: int) -> float:
        return self._at(self.forward, batch)

    def backward_s(self, batch: int) -> float:
        return self._at(self.backward, batch)

    def loss_s(self, batch: int) -> float:
        return self._at(self.loss, batch)

    def step_s(self) -> float:
        return self.step


@dataclass
class _Host:
    """The host thread's view of the simulation: clock, network, trace, phase durations."""

    env: simpy.Environment
    cluster: Cluster
    network: Network
    trace: Trace
    copies: Copies
    phases: dict[str, float] = field(default_factory=dict)

    def busy(self, device: int, kind: str, name: str, seconds: float,
             nbytes: int = 0) -> Generator[simpy.Event, Any, None]:
        start = self.env.now
        yield self.env.timeout(seconds)
        self.trace.record(device, kind, name, start, self.env.now, nbytes)

    def copy(self, src: int, dst: int, nbytes: int,
             name: str) -> Generator[simpy.Event, Any, None]:
        start = self.env.now
        yield from self.network.transfer(src, dst, nbytes)
        self.trace.record(dst if src == 0 else src, "memcpy", name, start, self.env.now, nbytes)

    def copy_all(self, moves: list[tuple[int, int, int]],
                 name: str) -> Generator[simpy.Event, Any, None]:
        """Copies ``(src, dst, nbytes)``: one after another, or all at once (an empty one is
        skipped: there is nothing to copy)."""
        moves = [m for m in moves if m[2] > 0]
        if self.copies == "serial":
            for src, dst, n in moves:
                yield from self.copy(src, dst, n, f"{name} {src}->{dst}")
        else:
            yield self.env.all_of([self.env.process(self.copy(s, d, n, f"{name} {s}->{d}"))
                                   for s, d, n in moves])

    def phase(self, name: str, start: float) -> None:
        self.phases[name] = float(self.env.now) - start


def simulate_data_parallel(cluster: Cluster, workload: Workload, profile: ComputeProfile,
                           copies: Copies = "serial", backward: Backward = "parallel",
                           cores: int | None = None,
                           first_sum_Bps: float | None = None) -> SimResult:
    """One DataParallel iteration on ``cluster`` (one replica per device, host on device 0).

    ``reduce_add`` makes its first sum into a new tensor and adds the rest in place;
    ``first_sum_Bps`` is the rate of that first sum when it differs from device 0's
    ``reduce_Bps`` (on CPU: new memory is mapped page by page on first touch).

    Returns a :class:`~simulator.core.comm.SimResult` whose ``returns[0]`` maps each of
    :data:`PHASES` to its duration, s; its trace has one row per device.
    """
    env = simpy.Environment()
    host = _Host(env, cluster, Network(env, cluster.topology), Trace(), copies)
    process = env.process(_iteration(host, workload, profile, backward, cores,
                                     first_sum_Bps or cluster.devices[0].reduce_Bps))
    env.run()
    if not process.triggered:
        raise RuntimeError("the DataParallel iteration never finished")
    p = cluster.world_size
    return SimResult(makespan_s=float(env.now), finish_s=[float(env.now)] * p,
                     returns=[host.phases] + [None] * (p - 1), trace=host.trace,
                     bytes_per_channel=dict(host.network.bytes_per_channel),
                     peak_memory_bytes=[0] * p)


def _iteration(host: _Host, w: Workload, profile: ComputeProfile, backward: Backward,
               cores: int | None, first_sum_Bps: float) -> Generator[simpy.Event, Any, None]:
    env, dev0 = host.env, host.cluster.devices[0]
    sizes = chunk_sizes(w.batch, host.cluster.world_size)
    k = len(sizes)
    others = range(1, k)
    slowdown = max(1.0, k / cores) if cores else 1.0

    def run_all(kind: str, seconds: list[float]) -> Generator[simpy.Event, Any, None]:
        yield env.all_of([env.process(host.busy(i, "compute", f"{kind} {i}", s))
                          for i, s in enumerate(seconds)])

    t = env.now  # 1. scatter the inputs
    yield from host.copy_all([(0, i, sizes[i] * w.input_bytes_per_sample) for i in others],
                             "scatter")
    host.phase("scatter", t)
    t = env.now  # 2. replicate parameters and buffers, every iteration
    yield from host.copy_all([(0, i, w.param_bytes + w.buffer_bytes) for i in others],
                             "replicate")
    host.phase("replicate", t)
    t = env.now  # 3. parallel apply: every replica's forward at once
    yield from run_all("forward", [profile.forward_s(c) * slowdown for c in sizes])
    host.phase("apply", t)
    t = env.now  # 4. gather the outputs onto device 0 (its own chunk is a local copy)
    own = sizes[0] * w.output_bytes_per_sample
    yield from host.busy(0, "memcpy", "gather 0->0", own / dev0.memcpy_Bps, own)
    yield from host.copy_all([(i, 0, sizes[i] * w.output_bytes_per_sample) for i in others],
                             "gather")
    host.phase("gather", t)
    t = env.now  # the loss, on device 0
    yield from host.busy(0, "compute", "loss", profile.loss_s(w.batch))
    host.phase("loss", t)
    t = env.now  # backward: gather's backward scatters the output gradient, then the replicas
    yield from host.copy_all([(0, i, sizes[i] * w.output_bytes_per_sample) for i in others],
                             "scatter grad")
    if backward == "parallel":
        yield from run_all("backward", [profile.backward_s(c) for c in sizes])
    else:  # one autograd thread runs every replica's backward
        for i, c in enumerate(sizes):
            yield from host.busy(0, "compute", f"backward {i}", profile.backward_s(c))
    host.phase("backward", t)
    t = env.now  # reduce_add: every replica's gradients onto device 0
    for i in others:
        yield from host.copy_all([(i, 0, w.param_bytes)], "reduce")
        rate = first_sum_Bps if i == 1 else dev0.reduce_Bps
        yield from host.busy(0, "reduce", f"reduce_add +{i}", w.param_bytes / rate,
                             w.param_bytes)
    host.phase("reduce", t)
    t = env.now  # the optimizer steps on device 0's parameters only
    yield from host.busy(0, "compute", "optimizer step", profile.step_s())
    host.phase("step", t)


def data_parallel_phases(p: int, workload: Workload, profile: ComputeProfile, alpha_s: float,
                         beta_s_per_B: float, gamma_s_per_B: float, memcpy_s_per_B: float,
                         copies: Copies = "serial", backward: Backward = "parallel",
                         cores: int | None = None,
                         first_sum_s_per_B: float | None = None) -> dict[str, float]:
    """Closed form of each phase of :func:`simulate_data_parallel` (the module's table), s.

    Contention ``none`` on a topology where every device reaches device 0 with latency α and
    bandwidth 1/β; ``memcpy_s_per_B`` and ``gamma_s_per_B`` are device 0's copy and reduce
    times per byte, ``first_sum_s_per_B`` that of ``reduce_add``'s first sum (default γ).
    """
    sizes = chunk_sizes(workload.batch, p)
    k = len(sizes)
    w = workload

    def serial_copy(nbytes: float) -> float:
        return alpha_s + nbytes * beta_s_per_B if nbytes > 0 else 0.0

    def moves(nbytes: Sequence[float]) -> float:
        times = [serial_copy(n) for n in nbytes if n > 0]
        return (sum(times) if copies == "serial" else max(times)) if times else 0.0

    slowdown = max(1.0, k / cores) if cores else 1.0
    outputs = [c * w.output_bytes_per_sample for c in sizes[1:]]
    back = [profile.backward_s(c) for c in sizes]
    return {
        "scatter": moves([c * w.input_bytes_per_sample for c in sizes[1:]]),
        "replicate": moves([w.param_bytes + w.buffer_bytes] * (k - 1)),
        "apply": max(profile.forward_s(c) for c in sizes) * slowdown,
        "gather": sizes[0] * w.output_bytes_per_sample * memcpy_s_per_B + moves(outputs),
        "loss": profile.loss_s(w.batch),
        "backward": moves(outputs) + (max(back) if backward == "parallel" else sum(back)),
        "reduce": (k - 1) * serial_copy(w.param_bytes) + (0.0 if k == 1 else w.param_bytes * (
            (first_sum_s_per_B or gamma_s_per_B) + (k - 2) * gamma_s_per_B)),
        "step": profile.step_s(),
    }


def data_parallel_step_cost(p: int, workload: Workload, profile: ComputeProfile,
                            alpha_s: float, beta_s_per_B: float, gamma_s_per_B: float,
                            memcpy_s_per_B: float, copies: Copies = "serial",
                            backward: Backward = "parallel", cores: int | None = None) -> float:
    """Closed form of one DataParallel iteration: the sum of :func:`data_parallel_phases`, s."""
    return sum(data_parallel_phases(p, workload, profile, alpha_s, beta_s_per_B, gamma_s_per_B,
                                    memcpy_s_per_B, copies, backward, cores).values())


def ddp_step_cost(p: int, workload: Workload, profile: ComputeProfile, alpha_s: float,
                  beta_s_per_B: float, gamma_s_per_B: float) -> float:
    """DDP's iteration for comparison, s: every rank runs forward, loss and backward on its
    ``⌈b/p⌉`` samples and steps its own copy; the gradients are ring all-reduced once
    (:func:`~simulator.collectives.all_reduce.ring_all_reduce_cost`), with no overlap with
    the backward — an upper bound; :mod:`simulator.ddp` overlaps buckets with the backward."""
    local = chunk_sizes(workload.batch, p)[0]
    return (profile.forward_s(local) + profile.loss_s(local) + profile.backward_s(local)
            + ring_all_reduce_cost(p, workload.param_bytes, alpha_s, beta_s_per_B,
                                   gamma_s_per_B) + profile.step_s())


def best_replica_count(max_devices: int, workload: Workload, profile: ComputeProfile,
                       alpha_s: float, beta_s_per_B: float, gamma_s_per_B: float,
                       memcpy_s_per_B: float) -> int:
    """The replica count ``p ≤ max_devices`` with the shortest closed-form iteration (parallel
    backward, serial copies): past it the first device's copies cost more than the compute
    another replica saves."""
    costs = {p: data_parallel_step_cost(p, workload, profile, alpha_s, beta_s_per_B,
                                        gamma_s_per_B, memcpy_s_per_B)
             for p in range(1, max_devices + 1)}
    return min(costs, key=lambda p: (costs[p], p))


def pcie_cluster(p: int, device: Device = A100_80GB, link: Link = PCIE4) -> Cluster:
    """``p`` GPUs behind one PCIe switch, each with one port (:data:`PCIE4`)."""
    return Cluster.homogeneous(f"pcie-{device.name}x{p}", device, Topology.switch(p, link))


def threads_cluster(p: int, memcpy_Bps: float, reduce_Bps: float, copy_latency_s: float = 0.0,
                    name: str = "cpu") -> Cluster:
    """Replicas as threads of one CPU process: a "link" between replicas is a memcpy by the
    host thread (rate ``memcpy_Bps``), one at a time; device 0 reduces at ``reduce_Bps``.
    Compute times come from a measured :class:`TableProfile`, so the FLOP rate is unused."""
    cpu = Device(f"{name}-thread", flops_per_s=math.inf, mem_bandwidth_Bps=3 * reduce_Bps,
                 memory_bytes=math.inf, reduce_Bps=reduce_Bps, memcpy_Bps=memcpy_Bps)
    port = Link(copy_latency_s, memcpy_Bps, "fifo")
    return Cluster.homogeneous(f"threads-{name}x{p}", cpu, Topology.switch(p, port))
