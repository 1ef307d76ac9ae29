"""MirroredStrategy and MultiWorkerMirroredStrategy, simulated: one training step (ch. 17–18).

Twin of :mod:`backends.tf_distribute.mirrored`, :mod:`~backends.tf_distribute.
cross_device_ops` and :mod:`~backends.tf_distribute.multi_worker` (TF:
``tf.distribute.MirroredStrategy``, ``MultiWorkerMirroredStrategy``). One step of TF's custom
loop, ``k`` replicas, replica ``i`` on a slice of ``c_i`` rows (``torch.chunk``'s rule,
empty slices where rows run out), ``P`` parameter bytes::

    phase         who                   cost (one thread each, sharing the host's cores)
    compute       replica i (thread)    F(c_i) + L(c_i) + B(c_i)
    pack          replica i (thread)    P / R_copy                 gradients → one buffer
    all-reduce    last replica to       the cross-device op:       (merge call: one thread)
                  arrive, for everyone    ring      2(k−1)·k chunks copied, (k−1)·k added
                                          one dev.  k copies in, k−1 adds, k copies out
                                          hier.     inside groups, ring of leaders, back
    update        replica i (thread)    S (SGD on its own copy)

``F``, ``L``, ``B``, ``S`` come from a one-thread profile
(:class:`~simulator.data_parallel.TableProfile`), ``R_copy`` and the addition rate from the
host's primitives (:class:`HostRates`). The cross-device ops below are generator functions
with the same loops as the real ones — a copy where the real twin copies a chunk to another
device, an add where it adds — run by one :class:`Host` thread, as the real merge call runs
them. Replica threads share ``cores`` cores by processor sharing
(:class:`simulator.ddp.cores.CoreShare`), or at a measured speed
(``HostRates.thread_speed``).

The multi-worker step (:func:`simulate_multi_worker`) is an SPMD program instead: each worker
computes its slice, packs, runs the ring all-reduce between processes on the calibrated
cluster (:func:`simulator.collectives.all_reduce.ring_all_reduce`, the twin of the
collective the real strategy calls) and updates.

Units: seconds, bytes, bytes/s.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from simulator.collectives.all_reduce import ring_all_reduce as collective_ring_all_reduce
from simulator.collectives.chunks import chunk_bounds
from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.core.hardware import Cluster
from simulator.data_parallel import TableProfile, chunk_sizes
from simulator.ddp.cores import CoreShare

ITEMSIZE = 4
"""Bytes per element (float32)."""


@dataclass(frozen=True)
class HostRates:
    """What the one host thread of a merge call moves: a copy to another "device" at
    ``memcpy_Bps`` and an in-place addition at ``reduce_Bps`` (bytes/s); ``cores`` the host's
    CPU cores the replica threads share.

    ``thread_speed``: how fast each of the ``k`` replica threads works while all of them
    run at once, relative to one thread alone — a primitive measured on the host (threads
    share cores *and* memory bandwidth, and other processes take their share). ``None``:
    processor sharing of ``cores`` (:class:`~simulator.ddp.cores.CoreShare`) alone.
    """

    memcpy_Bps: float
    reduce_Bps: float
    cores: float
    thread_speed: float | None = None


class Host:
    """The thread running a cross-device op: copies and additions one after another."""

    def __init__(self, env: simpy.Environment, rates: HostRates) -> None:
        self.env, self.rates = env, rates

    def copy(self, nbytes: int) -> Generator[simpy.Event, Any, None]:
        """Transfer ``nbytes`` to another device (a memcpy on CPU)."""
        yield self.env.timeout(nbytes / self.rates.memcpy_Bps)

    def add(self, nbytes: int) -> Generator[simpy.Event, Any, None]:
        """Add ``nbytes`` into a buffer in place."""
        yield self.env.timeout(nbytes / self.rates.reduce_Bps)


HostGen = Generator[simpy.Event, Any, None]


def _bytes(bounds: tuple[int, int]) -> int:
    return (bounds[1] - bounds[0]) * ITEMSIZE


def ring_all_reduce(host: Host, nbytes: int, k: int) -> HostGen:
    """The ring between ``k`` devices (real: :func:`backends.tf_distribute.cross_device_ops.
    ring_all_reduce`): ``k−1`` reduce-scatter steps (copy and add one chunk per replica),
    ``k−1`` all-gather steps (copy one chunk per replica)."""
    bounds = chunk_bounds(nbytes // ITEMSIZE, k)
    for s in range(k - 1):  # reduce-scatter
        for r in range(k):
            chunk = _bytes(bounds[(r - s - 1) % k])
            yield from host.copy(chunk)
            yield from host.add(chunk)
    for s in range(k - 1):  # all-gather
        for r in range(k):
            yield from host.copy(_bytes(bounds[(r - s) % k]))


def reduction_to_one_device(host: Host, nbytes: int, k: int) -> HostGen:
    """Every buffer copied to one device and added there, the sum copied back to each
    (real: :class:`~backends.tf_distribute.cross_device_ops.ReductionToOneDevice`)."""
    yield from host.copy(nbytes)  # the first buffer into the sum
    for _ in range(k - 1):
        yield from host.copy(nbytes)
        yield from host.add(nbytes)
    for _ in range(k):
        yield from host.copy(nbytes)


def groups_of(k: int, group_size: int) -> list[list[int]]:
    """Replicas ``0 … k−1`` in consecutive groups of ``group_size`` (the last may be
    smaller): ``groups_of(5, 2) == [[0, 1], [2, 3], [4]]``; each group's first is its leader.
    Shared with the real twin."""
    if group_size < 1:
        raise ValueError(f"a group needs at least one device, got group_size={group_size}")
    return [list(range(g, min(g + group_size, k))) for g in range(0, k, group_size)]


def hierarchical_copy_all_reduce(host: Host, nbytes: int, k: int,
                                 group_size: int = 2) -> HostGen:
    """Reduce inside each group onto its leader, ring among the leaders, copy back inside
    each group (real: :class:`~backends.tf_distribute.cross_device_ops.
    HierarchicalCopyAllReduce`)."""
    groups = groups_of(k, group_size)
    for g in groups:
        for _ in g[1:]:
            yield from host.copy(nbytes)
            yield from host.add(nbytes)
    if len(groups) > 1:
        yield from ring_all_reduce(host, nbytes, len(groups))
    for g in groups:
        for _ in g[1:]:
            yield from host.copy(nbytes)


CrossDeviceOp = Callable[[Host, int, int], HostGen]
CROSS_DEVICE_OPS: dict[str, CrossDeviceOp] = {
    "ring": ring_all_reduce, "one_device": reduction_to_one_device,
    "hierarchical": hierarchical_copy_all_reduce}
"""The in-process all-reduces by the real twin's names
(:data:`backends.tf_distribute.measure.CROSS_DEVICE_OPS`)."""


def replica_rows(batch: int, replicas: int) -> list[int]:
    """Rows of each replica's slice of a global ``batch``: ``torch.chunk``'s rule, then
    empty slices for replicas left without rows (``replica_rows(5, 4) == [2, 2, 1, 0]``)."""
    sizes = chunk_sizes(batch, replicas)
    return sizes + [0] * (replicas - len(sizes))


def replica_compute_s(profile: TableProfile, rows: int) -> float:
    """Forward, loss and backward of one replica on ``rows`` rows, one thread, s (nothing
    for an empty slice)."""
    if rows == 0:
        return 0.0
    return profile.forward_s(rows) + profile.loss_s(rows) + profile.backward_s(rows)


@dataclass(frozen=True)
class StepPrediction:
    """One simulated step, s: ``step_s`` in all; ``compute_s`` until the last replica (or
    worker) has packed its gradients; ``all_reduce_s`` the cross-device op (the collective
    between workers: its slowest rank); ``update_s`` the optimizer's updates."""

    step_s: float
    compute_s: float
    all_reduce_s: float
    update_s: float


def simulate_mirrored(profile: TableProfile, param_bytes: int, batch: int, replicas: int,
                      rates: HostRates, cross_device_ops: str = "ring") -> StepPrediction:
    """One MirroredStrategy step on ``replicas`` replica threads of one host."""
    env = simpy.Environment()
    cores = CoreShare(env, rates.cores, replicas)
    host, op = Host(env, rates), CROSS_DEVICE_OPS[cross_device_ops]
    marks: dict[str, float] = {}

    def busy(seconds: float) -> HostGen:  # a replica thread's work, among the others'
        if rates.thread_speed is None:
            yield from cores.run(seconds)
        else:
            yield env.timeout(seconds / rates.thread_speed)

    def replica(rows: int) -> HostGen:
        yield from busy(replica_compute_s(profile, rows))
        yield from busy(param_bytes / rates.memcpy_Bps)  # pack the gradients

    def update() -> HostGen:
        yield from busy(profile.step_s())

    def step() -> HostGen:
        yield simpy.AllOf(env, [env.process(replica(c)) for c in replica_rows(batch, replicas)])
        marks["compute"] = env.now
        if replicas > 1:
            yield from op(host, param_bytes, replicas)
        marks["all_reduce"] = env.now
        yield simpy.AllOf(env, [env.process(update()) for _ in range(replicas)])

    env.process(step())
    env.run()
    end = float(env.now)
    return StepPrediction(end, marks["compute"], marks["all_reduce"] - marks["compute"],
                          end - marks["all_reduce"])


def multi_worker_step(comm: SimComm, profile: TableProfile, param_bytes: int,
                      rows: Sequence[int], busy: Callable[[float], HostGen],
                      marks: list[list[float]]) -> SimGen:
    """One worker's step: compute its slice, pack, ring all-reduce between the workers,
    update (``busy(s)``: ``s`` seconds of one free core's work, among the other workers');
    records when its all-reduce started and ended in ``marks[rank]``."""
    yield from busy(replica_compute_s(profile, rows[comm.rank]))
    yield from busy(param_bytes / comm.device.memcpy_Bps)  # pack the gradients
    start = comm.now
    if comm.world_size > 1:
        yield from collective_ring_all_reduce(comm, param_bytes, ITEMSIZE)
    marks[comm.rank] = [start, comm.now]
    yield from busy(profile.step_s())


def simulate_multi_worker(cluster: Cluster, profile: TableProfile, param_bytes: int,
                          batch: int, cores: float, speed: float | None = None
                          ) -> StepPrediction:
    """One MultiWorkerMirroredStrategy step, one worker per rank of ``cluster`` (the
    calibrated host's: :func:`simulator.host.factory.local_cluster`), one replica each;
    the workers' local work shares ``cores`` cores, or runs at the measured ``speed`` (as
    :attr:`HostRates.thread_speed`)."""
    p = cluster.world_size
    rows = replica_rows(batch, p)
    marks: list[list[float]] = [[0.0, 0.0] for _ in range(p)]
    holder: list[CoreShare] = []

    def program(comm: SimComm) -> SimGen:
        if not holder:
            holder.append(CoreShare(comm.env, cores, p))

        def busy(seconds: float) -> HostGen:
            if speed is None:
                yield from holder[0].run(seconds)
            else:
                yield comm.env.timeout(seconds / speed)

        yield from multi_worker_step(comm, profile, param_bytes, rows, busy, marks)

    result = run_spmd(cluster, program, trace=False)
    arrived = max(m[0] for m in marks)  # the ring starts with its last worker
    last = max(m[1] for m in marks)
    return StepPrediction(result.makespan_s, arrived, last - arrived, result.makespan_s - last)
