"""ParameterServerStrategy on PyTorch: parameter-server tasks, sharded variables, worker tasks.

Twin of TF's ``tf.distribute.experimental.ParameterServerStrategy`` (book chapter 19). A TF
cluster for it has three jobs: a **chief** (the coordinator: the Python program that builds the
model and schedules work, :mod:`backends.tf_distribute.coordinator`), ``W`` **worker** tasks
that run whatever function the coordinator sends them, and ``S`` **ps** tasks that hold the
variables. Workers never talk to one another: each reads the variables it needs from the ps
tasks, computes, and writes its update back, asynchronously.

This module is the cluster side:

* :class:`LocalCluster` — TF's ``multi_worker_test_base.create_in_process_cluster``: ``S`` ps
  and ``W`` worker processes on this host, each listening on a loopback socket; task names are
  TF device names (``/job:worker/replica:0/task:1``). Across machines the tasks are ranks a
  launcher started instead (:mod:`backends.tf_distribute.ps_ranks`); a strategy needs only
  the :class:`Cluster` they make;
* :class:`ParameterServer` — a ps task's store: variable shards by name, read and updated under
  one lock; each update carries the token of the closure that sent it and is applied once,
  however often a retried closure sends it again (what lets a worker die mid-closure);
* :class:`ShardedVariable` — TF's ``tf.distribute.experimental.partitioners``' result,
  ``ShardedVariable``: one large weight (an embedding table) cut in row blocks, one block per
  shard, the shards placed round-robin over the ps tasks. Its handle is small and picklable:
  a worker that receives it reads and updates the shards it needs, straight from their ps;
* :class:`FixedShardsPartitioner`, :class:`MinSizePartitioner` — TF's variable partitioners:
  how many shards a variable gets;
* :class:`ParameterServerStrategy` — the strategy object: the cluster, the partitioner, and
  :meth:`~ParameterServerStrategy.create_variable` (TF: a ``tf.Variable`` made under
  ``strategy.scope()``).

The tasks talk over point-to-point sockets (:mod:`backends.tf_distribute.ps_channel`: a dead
task breaks only the channels to it, as with TF's gRPC). Row blocks follow TF's rule: ``rows``
over ``n`` shards, the first ``rows mod n`` one row longer. Sizes are bytes, times seconds.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Listener
from typing import Any, Protocol

import torch

from backends.launch import rank_context
from backends.lifeline import InheritedFd, Lifeline, hold_lifeline
from backends.tf_distribute.ps_channel import (
    CONTEXT,
    UnavailableError,
    accept,
    channels_close,
    receive,
    request,
    send,
    task_name,
)

START_TIMEOUT_S = 20.0
"""How long the tasks of a :class:`LocalCluster` may take to start listening, s."""


# ---- row blocks and partitioners ------------------------------------------------------------

def row_blocks(rows: int, shards: int) -> list[tuple[int, int]]:
    """``[begin, end)`` rows of each of ``shards`` shards of a ``rows``-row variable: the
    first ``rows mod shards`` shards get one row more (TF's rule)."""
    if not 1 <= shards <= max(rows, 1):
        raise ValueError(f"cannot cut {rows} rows into {shards} shards")
    base, extra = divmod(rows, shards)
    bounds, begin = [], 0
    for i in range(shards):
        end = begin + base + (1 if i < extra else 0)
        bounds.append((begin, end))
        begin = end
    return bounds


def shard_of_row(row: int, rows: int, shards: int) -> tuple[int, int]:
    """``(shard, local row)`` holding global row ``row`` (the inverse of :func:`row_blocks`)."""
    if not 0 <= row < rows:
        raise IndexError(f"row {row} outside a variable of {rows} rows")
    base, extra = divmod(rows, shards)
    long_rows = extra * (base + 1)
    if row < long_rows:
        return row // (base + 1), row % (base + 1)
    return extra + (row - long_rows) // base, (row - long_rows) % base


@dataclass(frozen=True)
class FixedShardsPartitioner:
    """TF's ``FixedShardsPartitioner``: every variable gets ``num_shards`` shards (fewer if it
    has fewer rows)."""

    num_shards: int

    def __call__(self, rows: int, row_bytes: int) -> int:
        return max(1, min(self.num_shards, rows))


@dataclass(frozen=True)
class MinSizePartitioner:
    """TF's ``MinSizePartitioner``: as many shards as keep each at least ``min_shard_bytes``,
    at most ``max_shards`` (and at most one per row)."""

    min_shard_bytes: int = 256 << 10
    max_shards: int = 1

    def __call__(self, rows: int, row_bytes: int) -> int:
        by_size = (rows * row_bytes) // self.min_shard_bytes
        return max(1, min(self.max_shards, by_size, rows))


# ---- sharded variables ----------------------------------------------------------------------

@dataclass(frozen=True)
class Shard:
    """One row block of a :class:`ShardedVariable` (TF: one of ``ShardedVariable.variables``),
    stored as ``name`` on ps task ``ps``."""

    name: str
    ps: int
    begin: int
    end: int


@dataclass(frozen=True)
class ShardedVariable:
    """TF's ``ShardedVariable``: a ``rows × cols`` float32 weight in row blocks over ps tasks.

    A handle: the data stays on the ps tasks, so the handle is cheap to pickle into a closure.
    Reads fetch every shard (:meth:`read_value`) or only the rows asked for (:meth:`lookup`,
    TF's ``tf.nn.embedding_lookup`` on a sharded table); updates are additions (SGD's
    ``−lr·g``), applied by each shard's ps once per closure token."""

    name: str
    rows: int
    cols: int
    shards: tuple[Shard, ...]
    ps_addresses: tuple[tuple[str, int], ...]
    authkey: bytes = field(repr=False)

    def _ask(self, shard: Shard, message: tuple[Any, ...]) -> Any:
        return request(task_name("ps", shard.ps), self.ps_addresses[shard.ps], self.authkey,
                       message)

    def read_value(self) -> torch.Tensor:
        """The whole variable, shards concatenated (``rows × cols``)."""
        return torch.cat([self._ask(s, ("read", s.name)) for s in self.shards])

    def route(self, ids: torch.Tensor) -> Iterator[tuple[Shard, torch.Tensor, torch.Tensor]]:
        """For each shard holding some of ``ids``: the shard, the positions in ``ids`` and
        the local rows (raises :class:`IndexError` for a row the variable lacks)."""
        if ids.numel() and not (int(ids.min()) >= 0 and int(ids.max()) < self.rows):
            raise IndexError(f"{self.name} has rows 0 … {self.rows - 1}, asked for "
                             f"{int(ids.min())} … {int(ids.max())}")
        for s in self.shards:
            where = ((ids >= s.begin) & (ids < s.end)).nonzero().flatten()
            if where.numel():
                yield s, where, ids[where] - s.begin

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``ids`` (any shape of int64), gathered from their shards: ``(*ids.shape,
        cols)``."""
        flat = ids.flatten()
        out = torch.empty(flat.numel(), self.cols)
        for s, where, local in self.route(flat):
            out[where] = self._ask(s, ("gather", s.name, local))
        return out.view(*ids.shape, self.cols)

    def scatter_add(self, ids: torch.Tensor, values: torch.Tensor) -> None:
        """Add ``values[i]`` to row ``ids[i]`` (repeated ids add up), shard by shard."""
        token = CONTEXT.next_token()
        flat, vals = ids.flatten(), values.reshape(-1, self.cols)
        for s, where, local in self.route(flat):
            self._ask(s, ("scatter_add", s.name, local, vals[where], token))

    def assign_add(self, delta: torch.Tensor) -> None:
        """Add ``delta`` (``rows × cols``) to the whole variable."""
        token = CONTEXT.next_token()
        for s in self.shards:
            self._ask(s, ("add", s.name, delta[s.begin:s.end], token))


# ---- a ps task ------------------------------------------------------------------------------

class ParameterServer:
    """A ps task's variables (TF: the resource variables of one ``/job:ps`` task). Requests
    from the coordinator and every worker arrive on their own threads and are served under one
    lock, so each update is applied whole. ``tokens`` remembers which closure updates each
    shard has applied: a retried closure's repeat of an update already applied is skipped."""

    def __init__(self) -> None:
        self.values: dict[str, torch.Tensor] = {}
        self.tokens: dict[str, set[tuple[int, int]]] = {}
        self.lock = threading.Lock()

    def _once(self, name: str, token: tuple[int, int] | None) -> bool:
        if token is None:
            return True
        seen = self.tokens.setdefault(name, set())
        if token in seen:
            return False
        seen.add(token)
        return True

    def handle(self, message: tuple[Any, ...]) -> Any:
        """Serve one request; returns its answer (raises on a malformed one)."""
        op, name, *rest = message
        with self.lock:
            if op == "create":
                self.values[name] = rest[0].clone()
                return None
            if op == "echo":  # a primitive: the channel's round trip, for the lab's profile
                return rest[0]
            value = self.values[name]
            if op == "read":
                return value.clone()
            if op == "gather":
                return value[rest[0]]
            if op == "add" and self._once(name, rest[1]):
                value += rest[0]
                return True
            if op == "scatter_add" and self._once(name, rest[2]):
                value.index_add_(0, rest[0], rest[1])
                return True
            if op in ("add", "scatter_add"):
                return False
        raise ValueError(f"unknown request {op!r}")


def serve_connection(conn: Connection, ps: ParameterServer) -> None:
    """Answer one peer's requests until it hangs up."""
    with contextlib.suppress(EOFError, OSError):
        while True:
            message = receive(conn)
            try:
                send(conn, ("ok", ps.handle(message)))
            except Exception as exc:  # a bad request is the sender's error, not the task's
                send(conn, ("error", f"{type(exc).__name__}: {exc}"))


def ps_task_main(listener: Listener) -> None:
    """A ps task: accept connections forever, one thread each."""
    ps = ParameterServer()
    while True:
        conn = accept(listener)
        threading.Thread(target=serve_connection, args=(conn, ps), daemon=True).start()


def _task_main(job: str, index: int, authkey: bytes, ready: Any, lifeline: InheritedFd) -> None:
    """Body of a task process: die with the launcher, listen, say where, then serve."""
    hold_lifeline(lifeline)
    torch.set_num_threads(1)
    listener = Listener(("127.0.0.1", 0), authkey=authkey)
    ready.put((job, index, listener.address, os.getpid()))
    if job == "ps":
        ps_task_main(listener)
    else:
        from backends.tf_distribute.coordinator import worker_task_main

        worker_task_main(listener, index)


# ---- the cluster and the strategy -----------------------------------------------------------

@dataclass
class Task:
    """One task process: its job, index, address and process."""

    job: str
    index: int
    address: tuple[str, int]
    process: Any

    @property
    def name(self) -> str:
        return task_name(self.job, self.index)


class LocalCluster:
    """``num_workers`` worker and ``num_ps`` ps tasks as processes of this host (TF:
    ``create_in_process_cluster``), started from the launcher's fork server
    (:func:`backends.launch.rank_context`) and tied to this process by a lifeline: they die
    with it, however it dies. Use as a context manager; :meth:`stop` ends them all."""

    def __init__(self, num_workers: int, num_ps: int) -> None:
        if num_workers < 1 or num_ps < 1:
            raise ValueError(f"a cluster needs a worker and a ps, got {num_workers} workers "
                             f"and {num_ps} ps")
        self.authkey = os.urandom(16)
        self.lifeline = Lifeline()
        ctx = rank_context()
        ready = ctx.Queue()
        procs = {(job, i): ctx.Process(target=_task_main, name=f"distml-{job}{i}", daemon=True,
                                       args=(job, i, self.authkey, ready,
                                             self.lifeline.rank_end))
                 for job, n in (("ps", num_ps), ("worker", num_workers)) for i in range(n)}
        self.tasks: dict[tuple[str, int], Task] = {}
        try:
            for proc in procs.values():
                proc.start()
            deadline = time.monotonic() + START_TIMEOUT_S
            while len(self.tasks) < len(procs):
                with contextlib.suppress(queue.Empty):
                    job, i, address, _pid = ready.get(timeout=0.05)
                    self.tasks[job, i] = Task(job, i, address, procs[job, i])
                    continue
                dead = [task_name(*k) for k, p in procs.items() if p.exitcode is not None]
                if dead or time.monotonic() > deadline:
                    raise UnavailableError(f"tasks did not start: {', '.join(dead)} exited"
                                           if dead else f"tasks silent for {START_TIMEOUT_S} s")
        except BaseException:
            self.tasks = {k: Task(k[0], k[1], ("", 0), p) for k, p in procs.items()}
            self.stop()
            raise
        finally:
            ready.close()
        self.workers = [self.tasks["worker", i] for i in range(num_workers)]
        self.ps = [self.tasks["ps", i] for i in range(num_ps)]

    def kill_worker(self, index: int, signal_number: int = 9) -> None:
        """Kill worker ``index``'s process (SIGKILL by default): a preemption."""
        pid = self.workers[index].process.pid
        if pid is not None:
            os.kill(pid, signal_number)

    def stop(self) -> None:
        """End every task: terminate, then kill, and reap."""
        from backends.launch import reap

        reap([t.process for t in self.tasks.values() if t.process.pid is not None], grace_s=0.0)
        self.lifeline.close()
        channels_close([t.address for t in self.tasks.values()])

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Cluster(Protocol):
    """What a strategy and its coordinator need of a cluster: its tasks, and the key their
    channels' handshake checks (a :class:`LocalCluster`, or torchrun's ranks)."""

    authkey: bytes
    workers: list[Task]
    ps: list[Task]


class ParameterServerStrategy:
    """TF's ``ParameterServerStrategy(cluster_resolver, variable_partitioner)``: where
    variables go. Each variable is cut by ``variable_partitioner`` (default: one shard) and its
    shards placed round-robin over the ps tasks, continuing from the last variable's."""

    def __init__(self, cluster: Cluster,
                 variable_partitioner: FixedShardsPartitioner | MinSizePartitioner | None = None
                 ) -> None:
        self.cluster = cluster
        self.variable_partitioner = variable_partitioner
        self._next_ps = 0

    @property
    def num_workers(self) -> int:
        return len(self.cluster.workers)

    @property
    def num_ps(self) -> int:
        return len(self.cluster.ps)

    def create_variable(self, name: str, initial_value: torch.Tensor) -> ShardedVariable:
        """Place ``initial_value`` (``rows × cols`` float32; a vector is one column) on the ps
        tasks, sharded by the partitioner; returns its handle."""
        value = initial_value.detach().to(torch.float32)
        value = value.unsqueeze(1) if value.dim() == 1 else value
        rows, cols = value.shape
        partitioner = self.variable_partitioner or FixedShardsPartitioner(1)
        shards = []
        for k, (begin, end) in enumerate(row_blocks(rows, partitioner(rows, 4 * cols))):
            shards.append(Shard(f"{name}/part_{k}", self._next_ps % self.num_ps, begin, end))
            self._next_ps += 1
        var = ShardedVariable(name, rows, cols, tuple(shards),
                              tuple(t.address for t in self.cluster.ps), self.cluster.authkey)
        for s in shards:
            var._ask(s, ("create", s.name, value[s.begin:s.end]))
        return var
