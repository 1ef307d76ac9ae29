"""The parameter server (PS-Lite), simulated: scheduler, servers, workers on the cluster model.

Twin of :mod:`backends.parameter_server` (book ch. 3; Li et al., *Scaling Distributed Machine
Learning with the Parameter Server*, OSDI 2014). The same roles and the same messages: rank 0
is the scheduler, ranks ``1 … S`` the servers, ranks ``S+1 … S+W`` the workers. The key space
``0 … K−1`` is split into one contiguous range per server (:func:`key_ranges`); every iteration
each worker

1. waits as its consistency model says (:func:`required_clock`): BSP and SSP ask the servers
   for the clock ``t − τ`` (every worker has pushed ``t − τ`` iterations), async never waits;
2. **pulls** the keys it needs — a request to each server that owns some of them, answered
   with the values;
3. **computes** its gradient (time from a compute profile measured on one process, plus a
   seeded straggler delay, :func:`straggler_delays`);
4. **pushes** the gradient, sliced by key range; in BSP it waits for the answer, which the
   server sends only once all ``W`` workers' pushes of that iteration are summed and applied.

Each message is what the real van sends: a header of :data:`HEADER_BYTES` bytes, then the keys
(8 B each, unless they form one range) and the values (4 B each) as separate messages
(:func:`message_nbytes`). A server handles one request at a time (its van's receiving thread),
so its NIC and its CPU are where the **bottleneck** forms as workers are added.

This module also holds what both twins share — the layout checks, key ranges, the seeded
synthetic datasets and straggler draws — so the real twin imports them from here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from simulator.core.comm import SimComm, SimGen, SimResult, run_spmd
from simulator.core.hardware import Cluster

HEADER_FIELDS = 14
"""int64 fields of a message header (``backends.parameter_server.message.Meta``)."""
HEADER_BYTES = 8 * HEADER_FIELDS
CONSISTENCY_MODELS = ("bsp", "ssp", "async")


class PSConfigError(ValueError):
    """A parameter-server configuration that cannot work (the message says why)."""


# ---- shared specs -------------------------------------------------------------------------------

def check_layout(servers: int, workers: int, world: int | None = None) -> None:
    """One scheduler, at least one server and one worker, and a world of ``1 + S + W``."""
    if servers < 1:
        raise PSConfigError(f"a parameter server needs at least 1 server, got {servers}")
    if workers < 1:
        raise PSConfigError(f"a parameter server needs at least 1 worker, got {workers}")
    if world is not None and world != 1 + servers + workers:
        raise PSConfigError(f"{servers} servers and {workers} workers need a world of "
                            f"{1 + servers + workers} ranks (1 scheduler), got {world}")


def check_consistency(model: str, tau: int) -> None:
    """``model`` is bsp, ssp or async; τ ≥ 0."""
    if model not in CONSISTENCY_MODELS:
        raise PSConfigError(f"unknown consistency model {model!r}; choose one of "
                            f"{', '.join(CONSISTENCY_MODELS)}")
    if tau < 0:
        raise PSConfigError(f"the bounded delay τ must be >= 0, got {tau}")


def key_ranges(num_keys: int, servers: int,
               splits: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """Server ``s`` owns keys ``begin_s … end_s − 1`` (PS-Lite ``GetServerKeyRanges``).

    ``splits`` gives each server's first key (``splits[0] == 0``, increasing); by default the
    ranges are as equal as possible, the first ``num_keys mod S`` one key longer.
    """
    if servers < 1:
        raise PSConfigError(f"a parameter server needs at least 1 server, got {servers}")
    if num_keys < servers:
        raise PSConfigError(f"more servers ({servers}) than keys ({num_keys}): some server "
                            "would own no key")
    if splits is None:
        base, extra = divmod(num_keys, servers)
        splits = [s * base + min(s, extra) for s in range(servers)]
    starts = list(splits)
    if len(starts) != servers or starts[0] != 0 or any(
            b <= a for a, b in zip(starts, [*starts[1:], num_keys], strict=True)):
        raise PSConfigError(f"key splits {starts} must be {servers} increasing starts from 0, "
                            f"each below the next and below {num_keys} keys")
    return list(zip(starts, [*starts[1:], num_keys], strict=True))


def skewed_splits(num_keys: int, servers: int, hot_share: float) -> list[int]:
    """Splits giving server 0 a share ``hot_share`` of the keys, the others equal parts."""
    if servers == 1:
        return [0]
    if not 0 < hot_share < 1:
        raise PSConfigError(f"the hot server's share must be in (0, 1), got {hot_share}")
    hot = max(1, min(num_keys - servers + 1, round(hot_share * num_keys)))
    rest = key_ranges(num_keys - hot, servers - 1)
    return [0] + [hot + b for b, _ in rest]


def slice_bounds(keys: np.ndarray, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Positions ``[lo, hi)`` of each server's keys in a sorted key array."""
    starts = np.searchsorted(keys, [b for b, _ in ranges])
    ends = [*starts[1:].tolist(), len(keys)]
    return list(zip(starts.tolist(), ends, strict=True))


def message_nbytes(nkeys: int, nvals: int, keys_range: bool) -> list[int]:
    """The point-to-point messages one PS message is sent as: header, keys, values (bytes)."""
    parts = [HEADER_BYTES]
    if nkeys and not keys_range:
        parts.append(8 * nkeys)
    if nvals:
        parts.append(4 * nvals)
    return parts


def straggler_delays(seed: int, iterations: int, workers: int, mean_s: float,
                     slow_workers: int = 1) -> np.ndarray:
    """Extra seconds each worker spends in each iteration, ``[iterations, workers]``.

    The first ``slow_workers`` workers are stragglers: each iteration they lose an
    exponentially distributed time of mean ``mean_s`` (seeded); the others lose none.
    """
    delays = np.zeros((iterations, workers))
    if mean_s > 0 and slow_workers > 0:
        rng = np.random.default_rng(seed)
        delays[:, :slow_workers] = rng.exponential(mean_s, (iterations, slow_workers))
    return delays


def required_clock(model: str, iteration: int, tau: int) -> int | None:
    """The clock an SSP worker waits for before iteration ``t`` (``None``: no wait).

    SSP: every worker must have pushed ``t − τ`` iterations, so the weights it then pulls miss
    at most the last τ iterations of any worker (Ho et al. 2013, bounded staleness). BSP needs
    no clock: its push is answered only once the iteration's update is applied, so the next
    pull sees it. Async never waits.
    """
    if model != "ssp" or iteration - tau <= 0:
        return None
    return iteration - tau


# ---- seeded synthetic data --------------------------------------------------------------------

@dataclass(frozen=True)
class SparseLRData:
    """A sparse binary-feature logistic-regression dataset, generated from a seed.

    Example ``i`` has ``nnz`` distinct active features out of ``num_features`` (drawn uniformly,
    or with Zipf weights ``1/(f+1)^zipf`` so that low feature ids are hot — the skew a real click
    log has), and label ``1`` with probability ``σ(x·w*)`` for a seeded true weight vector.
    Key ``num_features`` is the bias.
    """

    num_features: int = 1000
    num_examples: int = 4096
    nnz: int = 16
    seed: int = 0
    zipf: float = 0.0

    @property
    def num_keys(self) -> int:
        return self.num_features + 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(features [N, nnz] int64, labels [N] float32)``."""
        rng = np.random.default_rng(self.seed)
        p = 1.0 / np.arange(1, self.num_features + 1) ** self.zipf
        p /= p.sum()
        feats = np.stack([np.sort(rng.choice(self.num_features, self.nnz, replace=False, p=p))
                          for _ in range(self.num_examples)])
        w_true = rng.normal(0.0, 1.0, self.num_features) / math.sqrt(self.nnz)
        logits = w_true[feats].sum(axis=1)
        labels = (rng.random(self.num_examples) < 1 / (1 + np.exp(-logits))).astype(np.float32)
        return feats.astype(np.int64), labels


def batch_rows(iteration: int, batch_size: int, num_examples: int, worker: int,
               workers: int) -> np.ndarray:
    """Rows of worker ``worker``'s shard of global batch ``iteration``: every ``W``-th row."""
    start = (iteration * batch_size) % num_examples
    rows = (start + np.arange(batch_size)) % num_examples
    return rows[worker::workers]


def worker_keys(feats: np.ndarray, rows: np.ndarray, num_features: int) -> np.ndarray:
    """The sorted keys a worker pulls and pushes for these rows: their features and the bias."""
    return np.unique(np.append(feats[rows].ravel(), num_features))


def mlp_num_params(sizes: Sequence[int]) -> int:
    """Parameters of an MLP with layer widths ``sizes`` (weights and biases)."""
    return sum(a * b + b for a, b in itertools.pairwise(sizes))


# ---- the cost of work on shared cores ---------------------------------------------------------

class CpuPool:
    """``cores`` CPU cores shared by every process of one host (processor sharing).

    ``yield from cpu.run(seconds)`` does ``seconds`` of single-core work; while ``k`` pieces of
    work are in progress each runs at ``min(1, cores/k)`` of a core, so five processes on two
    cores take 2.5 times as long as one alone — the oversubscription a small machine has when
    it runs ``1 + S + W`` ranks. ``cores = inf`` gives every process its own core.
    """

    def __init__(self, env: simpy.Environment, cores: float) -> None:
        self.env, self.cores = env, cores
        self._jobs: list[list[Any]] = []  # [remaining s, done event]
        self._last = 0.0
        self._version = 0

    def _rate(self) -> float:
        return min(1.0, self.cores / len(self._jobs)) if self._jobs else 1.0

    def _advance(self) -> None:
        rate, dt = self._rate(), self.env.now - self._last
        for job in self._jobs:
            job[0] -= rate * dt
        self._last = self.env.now

    def _arm(self) -> None:
        self._version += 1
        if self._jobs:
            dt = max(0.0, min(j[0] for j in self._jobs)) / self._rate()
            self.env.process(self._wake(dt, self._version))

    def _wake(self, dt: float, version: int) -> SimGen:
        yield self.env.timeout(dt)
        if version != self._version:
            return
        self._advance()
        done = [j for j in self._jobs if j[0] <= 1e-12]
        self._jobs = [j for j in self._jobs if j[0] > 1e-12]
        for job in done:
            job[1].succeed()
        self._arm()

    def run(self, seconds: float) -> SimGen:
        """Do ``seconds`` of one core's work."""
        if seconds <= 0:
            return
        if math.isinf(self.cores):
            yield self.env.timeout(seconds)
            return
        self._advance()
        job: list[Any] = [seconds, self.env.event()]
        self._jobs.append(job)
        self._arm()
        yield job[1]


# ---- the simulated twin -----------------------------------------------------------------------

@dataclass(frozen=True)
class PSCosts:
    """The software costs of the real twin's code, measured on one process (s).

    Attributes:
        message_s: a message's header coded and decoded and its tensors allocated, per
            message, on each side.
        anysource_s: what a header costs more than a plain message because the receiving
            thread takes it *from any source*: gloo's handshake, the sender's send-ready
            notice and the receiver's recv-ready answer (:class:`AnySource`); measured by
            ping-pong, not on a PS run.
        wakeup_s: a waiting thread woken by another (a response handed to the app).
        push_s, push_per_value_s: a server handling a push: fixed and per value.
        pull_s, pull_per_value_s: a server handling a pull.
        apply_per_value_s: BSP: applying the summed gradient, per value.
    """

    message_s: float = 20e-6
    anysource_s: float = 40e-6
    wakeup_s: float = 30e-6
    push_s: float = 30e-6
    push_per_value_s: float = 5e-9
    pull_s: float = 30e-6
    pull_per_value_s: float = 3e-9
    apply_per_value_s: float = 5e-9


@dataclass(frozen=True)
class VanLink:
    """The van's point-to-point messages on one host, measured as the van sends them.

    On loopback a message is no wire's α + n/B: both ends are processes on the host's cores,
    and moving a message *is* CPU work — socket copies, gloo's loop thread, thread wake-ups —
    whose total is about its one-way time when the cores are free. A header is received *from
    any source*, and when several peers send to one node (its *fan-in*: a server hears from
    ``W`` workers, a worker from ``S`` servers) messages often arrive before the receive is
    posted, which costs more. So the lab times the van's own pattern, a header then a payload,
    as an echo from ``k`` senders to one node at the run's world size
    (:func:`lab.parameter_server.van_echo`), and the simulated van spends that CPU on the
    shared cores (or, with ``on_cores=False``, as a plain delay).

    Attributes:
        header_s: CPU seconds of one header (both ends), per fan-in ``1, 2, …``.
        payload_s: fixed CPU seconds of a payload after its header, per fan-in.
        payload_Bps: bytes per CPU second of a payload, per fan-in.
        on_cores: the cost is work of the host's shared cores (loopback); ``False``: a delay.
    """

    header_s: tuple[float, ...]
    payload_s: tuple[float, ...]
    payload_Bps: tuple[float, ...]
    on_cores: bool = True

    def time(self, nbytes: int, header: bool, fan_in: int = 1) -> float:
        """Cost of one part of a PS message (the header, or a payload) sent to a node with
        ``fan_in`` peers sending to it (beyond the measured fan-ins: the largest), s."""
        k = min(max(fan_in, 1), len(self.header_s)) - 1
        if header:
            return self.header_s[k]
        return self.payload_s[k] + nbytes / self.payload_Bps[k]


ZERO_COST_LINK_BPS = 1e15
"""Bandwidth of the cluster links that only carry the messages when a :class:`VanLink` prices
them (bytes/s; latency 0)."""


def van_cluster(cluster: Cluster) -> Cluster:
    """``cluster`` with links that cost nothing: the messages still travel (and rendezvous),
    but a :class:`VanLink` sets their time."""
    from dataclasses import replace

    from simulator.core.network import Link, Topology

    link = Link(0.0, ZERO_COST_LINK_BPS)
    return replace(cluster, topology=Topology.fully_connected(cluster.world_size, link))


@dataclass(frozen=True)
class PSSpec:
    """One simulated training run.

    Attributes:
        servers, workers: ``S`` and ``W``.
        consistency, tau: ``bsp``, ``ssp`` (with bounded delay τ) or ``async``.
        slices: keys each worker pulls and pushes from each server per iteration,
            ``[iterations, workers, servers]`` (see :func:`sparse_lr_slices`,
            :func:`dense_slices`).
        dense: the keys are contiguous ranges (no keys payload on the wire).
        compute_s: each worker's gradient time per iteration, ``[iterations, workers]``, s.
        delay_s: straggler delays (:func:`straggler_delays`), same shape, s.
        costs: the software costs (:class:`PSCosts`).
        cores: CPU cores the ranks share (``inf``: one each, as on a real cluster).
        van: the van's measured point-to-point times (:class:`VanLink`); ``None``: messages
            cost what the cluster's network says. With a van link, run on a cluster whose
            links cost nothing (:func:`van_cluster`).
        rendezvous: sends wait for the receiver, as gloo's do (this lab's van); ``False``:
            sends are queued and the sender goes on, as PS-Lite's ZeroMQ van does.
    """

    servers: int
    workers: int
    consistency: str
    tau: int
    slices: np.ndarray
    dense: bool
    compute_s: np.ndarray
    delay_s: np.ndarray
    costs: PSCosts = PSCosts()
    cores: float = math.inf
    van: VanLink | None = None
    rendezvous: bool = True

    @property
    def iterations(self) -> int:
        return int(self.slices.shape[0])

    @property
    def world_size(self) -> int:
        return 1 + self.servers + self.workers


def dense_slices(num_keys: int, servers: int, workers: int, iterations: int,
                 splits: Sequence[int] | None = None) -> np.ndarray:
    """Every worker pulls and pushes every key: each server's range size."""
    sizes = [e - b for b, e in key_ranges(num_keys, servers, splits)]
    return np.broadcast_to(np.array(sizes), (iterations, workers, servers)).copy()


def sparse_lr_slices(data: SparseLRData, servers: int, workers: int, iterations: int,
                     batch_size: int, splits: Sequence[int] | None = None) -> np.ndarray:
    """Keys per server that each worker's shard of each batch touches (exactly the real ones)."""
    feats, _ = data.arrays()
    ranges = key_ranges(data.num_keys, servers, splits)
    out = np.zeros((iterations, workers, servers), dtype=np.int64)
    for t in range(iterations):
        for w in range(workers):
            keys = worker_keys(feats, batch_rows(t, batch_size, data.num_examples, w, workers),
                               data.num_features)
            out[t, w] = [hi - lo for lo, hi in slice_bounds(keys, ranges)]
    return out


@dataclass(frozen=True)
class PSTimeline:
    """What a simulated run returns: each worker's iteration start and end times (s), the
    staleness of each of its pulls, and the time it idled in its consistency model's wait
    (``wait_s``, s, ``[iterations, workers]``). ``events`` lists, in simulated time order,
    what the servers did to the weights — ``(time_s, kind, server, [(worker, t), …])`` with
    kind ``pull`` (a worker's iteration ``t`` read the server's range) or ``apply`` (pushes
    applied) — from which :func:`simulator.ps_convergence.replay_sparse_lr` replays training.
    ``server_busy_s``: per server, the time per iteration its one receiving thread was held
    (receiving, handling, answering), s."""

    start_s: np.ndarray
    end_s: np.ndarray
    staleness: np.ndarray
    server_bytes: list[int]
    wait_s: np.ndarray | None = None
    events: tuple[tuple[float, str, int, tuple[tuple[int, int], ...]], ...] = ()
    server_busy_s: list[float] | None = None

    def idle_time_s(self, warmup: int = 2) -> float:
        """Mean time per iteration a worker idles in its consistency model's wait, s
        (:func:`idle_time_s`)."""
        return idle_time_s(self.wait_s if self.wait_s is not None
                           else np.zeros_like(self.start_s), warmup)

    def time_per_iteration_s(self, warmup: int = 2) -> float:
        """Median over workers and iterations (after ``warmup``) of one iteration's time, s:
        from one iteration's start to the next one's (the last: to its end)."""
        return iteration_time_s(self.start_s, self.end_s, warmup)

    def throughput(self, batch_size: int, warmup: int = 2) -> float:
        """Examples per second, all workers together (each at its median iteration time)."""
        return throughput(self.start_s, self.end_s, batch_size, warmup)


def iteration_times(start_s: np.ndarray, end_s: np.ndarray, warmup: int = 2) -> np.ndarray:
    """Each iteration's time per worker, ``[iterations − warmup, workers]``, s.

    Both twins report time per iteration this way, from the same per-iteration timestamps.
    The median is robust to the odd iteration a shared machine's scheduler stretches.
    """
    nxt = np.concatenate([start_s[1:], end_s[-1:]], axis=0)
    k = min(warmup, start_s.shape[0] - 1)
    times: np.ndarray = (nxt - start_s)[k:]
    return times


def idle_time_s(wait_s: np.ndarray, warmup: int = 2) -> float:
    """Mean over workers and iterations (after ``warmup``) of the time a worker spent blocked
    in its consistency model's wait, s: BSP — for the answer to its push, which a server sends
    only once every worker's push of the iteration is applied; SSP — for the clock ``t − τ``;
    async — never (0). Both twins measure it the same way, per iteration."""
    k = min(warmup, wait_s.shape[0] - 1)
    return float(np.mean(wait_s[k:]))


def iteration_time_s(start_s: np.ndarray, end_s: np.ndarray, warmup: int = 2) -> float:
    """Median of :func:`iteration_times` over workers and iterations, s."""
    return float(np.median(iteration_times(start_s, end_s, warmup)))


def throughput(start_s: np.ndarray, end_s: np.ndarray, batch_size: int,
               warmup: int = 2) -> float:
    """Examples per second: each worker's share of the batch over its median iteration."""
    per_worker = np.median(iteration_times(start_s, end_s, warmup), axis=0)
    return float(np.sum(batch_size / start_s.shape[1] / per_worker))


REQUEST_TAG, RESPONSE_TAG, READY_TAG = 31, 32, 33


class _ServerState:
    """What one simulated server shares between its per-worker handlers."""

    def __init__(self, env: simpy.Environment, spec: PSSpec, server: int,
                 events: list[tuple[float, str, int, tuple[tuple[int, int], ...]]],
                 anysource: AnySource) -> None:
        self.env, self.spec, self.server, self.events = env, spec, server, events
        self.anysource = anysource
        self.thread = simpy.Resource(env, capacity=1)  # the van's one receiving thread
        self.clock = [0] * spec.workers
        self.arrived = [0] * spec.iterations  # BSP pushes per iteration
        self.applied = [env.event() for _ in range(spec.iterations)]
        self.advanced = env.event()  # fires whenever the slowest clock may have moved
        self.sent = 0
        self.busy_s = 0.0  # time its receiving thread was held

    @property
    def min_clock(self) -> int:
        return min(self.clock)


def _requests(spec: PSSpec, worker: int, server: int) -> list[tuple[str, int, int]]:
    """The requests a worker sends one server, in order: (kind, iteration, keys)."""
    out = []
    for t in range(spec.iterations):
        if required_clock(spec.consistency, t, spec.tau) is not None:
            out.append(("clock", t, 0))
        n = int(spec.slices[t, worker, server])
        if n:
            out.append(("pull", t, n))
        out.append(("push", t, n))
    return out


def _transfer(comm: SimComm, cpu: CpuPool, dst: int, nbytes: int, tag: int,
              van: VanLink | None, header: bool, fan_in: int) -> SimGen:
    """Move one part of a PS message: at the van link's measured cost (on the shared cores,
    or as a delay), or at the cluster network's."""
    if van is not None:
        if van.on_cores:
            yield from cpu.run(van.time(nbytes, header, fan_in))
        else:
            yield comm.env.timeout(van.time(nbytes, header, fan_in))
    yield from comm.send(dst, nbytes, tag)


class AnySource:
    """The handshake of a header sent to a receive *from any source* over gloo, per pair.

    gloo's sends are receiver-driven: a sender announces its message (send-ready notice), and
    a receive from any source takes the first announced sender once the receiving thread posts
    it, tells that sender to go (recv-ready), and only then do the bytes move. Both notices
    are handled by gloo's own loop threads, not the van's; together they cost
    ``PSCosts.anysource_s`` (measured by ping-pong: a receive from any source against a named
    one, :func:`lab.parameter_server.measure_anysource`). So a header to a node whose receiving
    thread is busy waits, unsent, until the thread is free: it is not in flight.
    """

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._stores: dict[tuple[str, int, int, int], simpy.Store] = {}

    def _store(self, kind: str, src: int, dst: int, tag: int) -> simpy.Store:
        key = (kind, src, dst, tag)
        if key not in self._stores:
            self._stores[key] = simpy.Store(self.env)
        return self._stores[key]

    def announce(self, src: int, dst: int, tag: int) -> Any:
        """The sender announces its next header; returns the event of being told to go."""
        self._store("ready", src, dst, tag).put(True)
        return self._store("go", src, dst, tag).get()

    def announced(self, src: int, dst: int, tag: int) -> Any:
        """The event of ``src``'s next header being announced to ``dst``."""
        return self._store("ready", src, dst, tag).get()

    def go(self, src: int, dst: int, tag: int) -> None:
        """``dst``'s receiving thread takes ``src``'s announced header."""
        self._store("go", src, dst, tag).put(True)


def _send(comm: SimComm, cpu: CpuPool, dst: int, parts: list[int], tag: int,
          costs: PSCosts, van: VanLink | None = None, fan_in: int = 1,
          rendezvous: bool = True, anysource: AnySource | None = None) -> SimGen:
    """Send one PS message as the van does over gloo: code it, then every part is a
    rendezvous (gloo's sends are receiver-driven: a part moves only once the receiver has
    posted its receive). The header goes to a receive from any source (:class:`AnySource`):
    it waits until the receiving thread of ``dst`` is free and takes it, then pays the
    handshake's ``anysource_s``; each payload waits until the receiver, having read the
    header, says it has posted the receive for it. With a measured :class:`VanLink`
    (``fan_in``: peers sending to ``dst``) the handshakes are in its costs: the ready signal
    then travels on the zero-cost cluster. Without ``rendezvous`` (PS-Lite's ZeroMQ van
    queues what it sends) every part is handed to the network and the sender goes on at
    once."""
    yield from cpu.run(costs.message_s)
    if not rendezvous:
        for nbytes in parts:
            comm.isend(dst, nbytes, tag)
        return
    if anysource is not None:
        yield anysource.announce(comm.rank, dst, tag)
    if costs.anysource_s:
        yield comm.env.timeout(costs.anysource_s)
    yield from _transfer(comm, cpu, dst, parts[0], tag, van, True, fan_in)
    for nbytes in parts[1:]:
        yield from comm.recv(dst, 0, READY_TAG)
        yield from _transfer(comm, cpu, dst, nbytes, tag, van, False, fan_in)


def _recv(comm: SimComm, cpu: CpuPool, src: int, parts: list[int], tag: int,
          costs: PSCosts, header: bool = True, rendezvous: bool = True) -> SimGen:
    """Receive one PS message: the header (unless already taken), then each payload after
    telling the sender the receive is posted."""
    if header:
        yield from comm.recv(src, parts[0], tag)
    yield from cpu.run(costs.message_s)
    for nbytes in parts[1:]:
        if rendezvous:
            comm.isend(src, 0, READY_TAG)
        yield from comm.recv(src, nbytes, tag)


def _server_handler(comm: SimComm, cpu: CpuPool, st: _ServerState, worker: int) -> SimGen:
    """The server's receiving thread, as far as one worker's requests go."""
    spec, c = st.spec, st.spec.costs
    node = 1 + spec.servers + worker
    for kind, t, n in _requests(spec, worker, st.server):
        req = message_nbytes(n, n if kind == "push" else 0, spec.dense)
        if spec.rendezvous:
            yield st.anysource.announced(node, comm.rank, REQUEST_TAG)
        else:
            yield comm.irecv(node, req[0], REQUEST_TAG).wait()
        with st.thread.request() as hold:
            yield hold
            start = comm.now
            if spec.rendezvous:  # the receive from any source takes this worker's header
                st.anysource.go(node, comm.rank, REQUEST_TAG)
                yield from comm.recv(node, req[0], REQUEST_TAG)
            yield from _recv(comm, cpu, node, req, REQUEST_TAG, c, False, spec.rendezvous)
            if kind == "clock":
                need = required_clock(spec.consistency, t, spec.tau) or 0
            elif kind == "pull":
                yield from cpu.run(c.pull_s + c.pull_per_value_s * n)
                st.events.append((comm.now, "pull", st.server, ((worker, t),)))
            else:
                yield from cpu.run(c.push_s + c.push_per_value_s * n)
                if spec.consistency == "bsp":
                    st.arrived[t] += 1
                    if st.arrived[t] == spec.workers:
                        touched = int(spec.slices[t, :, st.server].sum())  # an upper bound
                        yield from cpu.run(c.apply_per_value_s * touched)
                        st.events.append((comm.now, "apply", st.server,
                                          tuple((w, t) for w in range(spec.workers))))
                        st.clock = [t + 1] * spec.workers
                        st.applied[t].succeed()
                else:
                    st.events.append((comm.now, "apply", st.server, ((worker, t),)))
                    st.clock[worker] = t + 1
                    st.advanced.succeed()
                    st.advanced = comm.env.event()
            comm.span("handle", f"{kind} {t}", start, 4 * n)
            st.busy_s += comm.now - start
        if kind == "clock":
            while st.min_clock < need:
                yield st.advanced
        elif kind == "push" and spec.consistency == "bsp":
            yield st.applied[t]
        vals = n if kind == "pull" else 0
        with st.thread.request() as hold:
            yield hold
            start = comm.now
            parts = message_nbytes(0, vals, spec.dense)
            st.sent += sum(parts)
            yield from _send(comm, cpu, node, parts, RESPONSE_TAG, c, spec.van,
                             spec.servers, spec.rendezvous, st.anysource)
            st.busy_s += comm.now - start


def _worker(comm: SimComm, cpu: CpuPool, spec: PSSpec, worker: int,
            clocks: list[_ServerState]) -> SimGen:
    c, S, W = spec.costs, spec.servers, spec.workers
    start, end = np.zeros(spec.iterations), np.zeros(spec.iterations)
    staleness = np.zeros(spec.iterations, dtype=np.int64)
    wait = np.zeros(spec.iterations)
    inbox: dict[tuple[str, int, int], simpy.Event] = {}

    thread = simpy.Resource(comm.env, capacity=1)  # the worker van's one receiving thread
    anysource = clocks[0].anysource

    def receiver(server: int) -> SimGen:
        """The worker's receiving thread, as far as one server's responses go: it takes
        whichever header arrives first, then that message's payloads, one message at a
        time."""
        for kind, t, n in _requests(spec, worker, server):
            parts = message_nbytes(0, n if kind == "pull" else 0, spec.dense)
            if spec.rendezvous:
                yield anysource.announced(1 + server, comm.rank, RESPONSE_TAG)
            else:
                yield comm.irecv(1 + server, parts[0], RESPONSE_TAG).wait()
            with thread.request() as hold:
                yield hold
                if spec.rendezvous:
                    anysource.go(1 + server, comm.rank, RESPONSE_TAG)
                    yield from comm.recv(1 + server, parts[0], RESPONSE_TAG)
                yield from _recv(comm, cpu, 1 + server, parts, RESPONSE_TAG, c, False,
                                 spec.rendezvous)
            inbox.setdefault((kind, t, server), comm.env.event()).succeed(clocks[server].min_clock)

    def answered(kind: str, t: int, servers: list[int]) -> SimGen:
        seen = []
        for s in servers:
            seen.append((yield inbox.setdefault((kind, t, s), comm.env.event())))
        yield from cpu.run(c.wakeup_s)
        return min(seen)

    for s in range(S):
        comm.env.process(receiver(s))
    for t in range(spec.iterations):
        start[t] = comm.now
        need = required_clock(spec.consistency, t, spec.tau)
        if need is not None:
            t0 = comm.now
            for s in range(S):
                yield from _send(comm, cpu, 1 + s, message_nbytes(0, 0, spec.dense),
                                 REQUEST_TAG, c, spec.van, W, spec.rendezvous, anysource)
            yield from answered("clock", t, list(range(S)))
            comm.span("wait", f"clock {need}", t0)
            wait[t] += comm.now - t0
        pulled = [s for s in range(S) if spec.slices[t, worker, s]]
        t0 = comm.now
        for s in pulled:
            yield from _send(comm, cpu, 1 + s,
                             message_nbytes(int(spec.slices[t, worker, s]), 0, spec.dense),
                             REQUEST_TAG, c, spec.van, W, spec.rendezvous, anysource)
        clock = yield from answered("pull", t, pulled)
        comm.span("pull", f"pull {t}", t0)
        staleness[t] = t - clock
        t0 = comm.now
        yield from cpu.run(spec.compute_s[t, worker])
        if spec.delay_s[t, worker] > 0:
            yield comm.env.timeout(spec.delay_s[t, worker])
        comm.span("compute", f"grad {t}", t0)
        t0 = comm.now
        for s in range(S):
            n = int(spec.slices[t, worker, s])
            yield from _send(comm, cpu, 1 + s, message_nbytes(n, n, spec.dense), REQUEST_TAG, c,
                             spec.van, W, spec.rendezvous, anysource)
        if spec.consistency == "bsp":
            t1 = comm.now
            yield from answered("push", t, list(range(S)))
            wait[t] += comm.now - t1
        comm.span("push", f"push {t}", t0)
        end[t] = comm.now
    return start, end, staleness, wait


class Host:
    """What the ranks of one simulation share: the cores, and the servers' state (made by
    whichever rank runs first)."""

    def __init__(self) -> None:
        self.cpu: CpuPool | None = None
        self.anysource: AnySource | None = None
        self.servers: list[_ServerState] = []
        self.events: list[tuple[float, str, int, tuple[tuple[int, int], ...]]] = []

    def setup(self, env: simpy.Environment, spec: PSSpec) -> tuple[CpuPool, list[_ServerState]]:
        if self.cpu is None:
            self.cpu = CpuPool(env, spec.cores)
            self.anysource = AnySource(env)
            self.servers = [_ServerState(env, spec, s, self.events, self.anysource)
                            for s in range(spec.servers)]
        return self.cpu, self.servers


def parameter_server(comm: SimComm, spec: PSSpec, host: Host) -> SimGen:
    """Rank program: the scheduler (rank 0) idles, servers handle, workers train."""
    if comm.rank == 0:
        return None
    cpu_pool, servers = host.setup(comm.env, spec)
    if comm.rank <= spec.servers:
        st = servers[comm.rank - 1]
        handlers = [comm.env.process(_server_handler(comm, cpu_pool, st, w))
                    for w in range(spec.workers)]
        yield comm.env.all_of(handlers)
        return st.sent, st.busy_s
    return (yield from _worker(comm, cpu_pool, spec, comm.rank - 1 - spec.servers, servers))


def simulate(cluster: Cluster, spec: PSSpec, trace: bool = True) -> tuple[PSTimeline, SimResult]:
    """Run :func:`parameter_server` on ``cluster`` (``1 + S + W`` ranks)."""
    check_layout(spec.servers, spec.workers, cluster.world_size)
    check_consistency(spec.consistency, spec.tau)
    host = Host()
    result = run_spmd(cluster, parameter_server, spec, host, trace=trace)
    workers = result.returns[1 + spec.servers:]
    events = tuple(host.events)
    timeline = PSTimeline(np.stack([w[0] for w in workers], axis=1),
                          np.stack([w[1] for w in workers], axis=1),
                          np.stack([w[2] for w in workers], axis=1),
                          [int(s[0]) for s in result.returns[1:1 + spec.servers]],
                          np.stack([w[3] for w in workers], axis=1), events,
                          [float(s[1]) / spec.iterations
                           for s in result.returns[1:1 + spec.servers]])
    return timeline, result


# ---- where the bottleneck moves (exercise 3.3) -------------------------------------------------

def star_cluster(servers: int, workers: int, server_Bps: float, worker_Bps: float,
                 latency_s: float = 1e-6) -> Cluster:
    """``1 + S + W`` hosts on one switch: each server's port runs at ``server_Bps``, every
    other port at ``worker_Bps`` (bytes/s); a message crosses two ports, so it goes at the
    slower of its two ends. ``latency_s``: α of a host-to-host path."""
    from simulator.core.hardware import Device
    from simulator.core.network import Link, Topology

    links: dict[frozenset[int | str], Link] = {
        frozenset((r, "sw")): Link(latency_s / 2, server_Bps if 1 <= r <= servers
                                   else worker_Bps)
        for r in range(1 + servers + workers)}

    def router(topo: Topology, src: int, dst: int) -> list[int | str]:
        return [src] if src == dst else [src, "sw", dst]

    topo = Topology(1 + servers + workers, links, "ps_star", router)
    host = Device("host", flops_per_s=1e12, mem_bandwidth_Bps=1e11, memory_bytes=math.inf)
    return Cluster.homogeneous("ps-star", host, topo)


def bottleneck_sweep(workers: int, server_Bps: float, worker_Bps: float, model_bytes: float,
                     servers: Sequence[int], rendezvous: bool = False,
                     iterations: int = 3) -> list[float]:
    """Time per iteration, s, for each ``S`` of ``servers``: BSP on a dense model of
    ``model_bytes`` (no compute, no software costs) on :func:`star_cluster`, every worker
    pushing and pulling all of it. ``rendezvous=False`` is PS-Lite's queued (ZeroMQ) van, where
    the ports are the only limit: time falls as servers are added until a server's port
    (``W·M/S`` each way) is no slower than a worker's (``M``), then stays flat. With
    ``rendezvous=True`` (this lab's gloo van: one receiving thread per node, blocking sends)
    a server moves one message at a time at the slower end's rate, so extra servers keep
    helping past that point and server bandwidth above a worker's buys nothing."""
    keys = int(model_bytes // 4)
    times = []
    for s in servers:
        spec = PSSpec(s, workers, "bsp", 0, dense_slices(keys, s, workers, iterations), True,
                      np.zeros((iterations, workers)), np.zeros((iterations, workers)),
                      PSCosts(*[0.0] * 8), rendezvous=rendezvous)
        timeline, _ = simulate(star_cluster(s, workers, server_Bps, worker_Bps), spec,
                               trace=False)
        times.append(timeline.time_per_iteration_s())
    return times


# ---- the classic comparison -----------------------------------------------------------------

def ps_vs_all_reduce(make_cluster: Callable[[int], Cluster], workers: int, servers: int,
                     num_keys: int, touched: float, compute_s: float,
                     iterations: int = 4) -> tuple[float, float]:
    """Time per iteration, s: BSP parameter server against ring all-reduce data parallelism.

    The same ``W`` workers and model (``num_keys`` float32 parameters) and the same compute.
    Each worker's gradient touches a share ``touched`` of the keys: the parameter server moves
    only those (with their keys, unless every key is touched), the ring all-reduce the whole
    dense gradient, ``2(W−1)/W`` of it per rank (Patarasuk & Yuan 2009). ``make_cluster(p)``
    builds a ``p``-rank cluster (the PS needs ``1 + S + W``, the ring ``W``).
    """
    from simulator.collectives.all_reduce import ring_all_reduce

    keys = max(servers, round(touched * num_keys))
    slices = dense_slices(keys, servers, workers, iterations)
    spec = PSSpec(servers, workers, "bsp", 0, slices, touched >= 1.0,
                  np.full((iterations, workers), compute_s), np.zeros((iterations, workers)),
                  PSCosts(*[0.0] * 8))
    ps = simulate(make_cluster(1 + servers + workers), spec, trace=False)[0]
    ring = 0.0
    if workers > 1:
        ring = run_spmd(make_cluster(workers), ring_all_reduce, 4 * num_keys,
                        trace=False).makespan_s
    return ps.time_per_iteration_s(), compute_s + ring
