"""The background thread: every cycle it negotiates, fuses and runs the collectives.

Book chapter 7, "The background thread" and "The cycle on a timeline"; Sergeev & Del Balso
(2018). Re-implemented after reading Horovod's ``horovod/common/operations.cc``
(``BackgroundThreadLoop``, ``RunLoopOnce``, ``PerformOperation``, ``EnqueueTensorAllreduce``),
``tensor_queue.cc`` and ``ops/collective_operations.cc``; no code is taken from them.

Framework threads call :meth:`Engine.enqueue`: it puts a
:class:`~backends.horovod.messages.Request` (small, sent to the coordinator) and a
:class:`TensorTableEntry` (the tensor, its output, the handle's completion event; stays local)
into the :class:`TensorQueue` and returns a handle at once. One thread per process then runs
:meth:`Engine.run_loop_once` until shutdown:

1. **sleep** until ``cycle_time`` has passed since the previous cycle began (no sleep if it
   already has: under load the loop is clocked by its own work);
2. **negotiate** (:meth:`~backends.horovod.negotiation.Controller.compute_response_list`) on the
   *control* group, a gloo process group that only this thread uses;
3. **perform** each response in list order on the *data* group: a single tensor is all-reduced
   in place; several are copied into the :class:`~backends.horovod.fusion.FusionBuffer`,
   all-reduced once, copied out; ``Average`` divides by the size afterwards (floor division for
   integer tensors, as Horovod's PyTorch binding does); broadcasts run one by one;
4. complete the handles, which wakes the threads waiting in ``synchronize``.

The collectives are ``torch.distributed``'s (the engine, not the algorithm, is the subject).

Timeline: with tracing on, the thread records per cycle ``WAIT`` (the sleep), ``NEGOTIATE``,
and per response ``MEMCPY_IN_FUSION_BUFFER``, ``ALLREDUCE`` (or ``BROADCAST``),
``MEMCPY_OUT_FUSION_BUFFER`` spans, in :mod:`backends.trace`'s schema (kind = the activity,
name = ``"cycle N"`` or ``"cycle N: tensor names"``, nbytes = bytes reduced); the framework
side adds an instant ``ENQUEUE`` span (start = end, name = the tensor's full name, nbytes = its
size) when a tensor is handed over, e.g. by a gradient hook. Counters
(:class:`Stats`) are kept always; they cost a few integer additions per cycle.

Failures: a collective that fails (a rank died, a timeout) stops the thread; every pending and
later handle then raises :class:`HorovodInternalError` with the cause.
"""

from __future__ import annotations

import itertools
import pickle
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from backends.horovod.fusion import FusionBuffer
from backends.horovod.messages import (
    ALLREDUCE,
    BROADCAST,
    ERROR,
    Request,
    RequestList,
    Response,
    ResponseList,
)
from backends.horovod.negotiation import Controller
from backends.trace import Tracer, span


class HorovodInternalError(RuntimeError):
    """A collective could not complete: a peer failed, the engine stopped, or a stall."""


@dataclass
class TensorTableEntry:
    """The local half of a request: the tensors and the handle's completion."""

    name: str
    tensor: torch.Tensor
    output: torch.Tensor
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


@dataclass
class Stats:
    """The background thread's counters (read with :func:`backends.horovod.stats`).

    Attributes:
        cycles: cycles run.
        coordinator_rounds: cycles that went through rank 0 (some rank had a cache miss).
        cache_hits: tensors agreed on through the response cache's bit vector.
        allreduces: all-reduce collectives run (one per fused response).
        tensors_allreduced: tensors those carried.
        allreduce_bytes: bytes of each all-reduce, in order (the last 10000).
        fused: ``(cycle, dtype, names)`` of each all-reduce, in order (the last 10000).
        broadcasts: broadcast collectives run.
        errors: handles failed by error responses (mismatches, stalls).
    """

    cycles: int = 0
    coordinator_rounds: int = 0
    cache_hits: int = 0
    allreduces: int = 0
    tensors_allreduced: int = 0
    allreduce_bytes: deque[int] = field(default_factory=lambda: deque(maxlen=10000))
    fused: deque[tuple[int, str, tuple[str, ...]]] = field(
        default_factory=lambda: deque(maxlen=10000))
    broadcasts: int = 0
    errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record_allreduce(self, cycle: int, dtype: str, names: list[str], nbytes: int) -> None:
        """Count one all-reduce (background thread)."""
        with self.lock:
            self.allreduces += 1
            self.tensors_allreduced += len(names)
            self.allreduce_bytes.append(nbytes)
            self.fused.append((cycle, dtype, tuple(names)))

    def snapshot(self) -> dict[str, Any]:
        """A plain copy (lists instead of deques)."""
        with self.lock:
            return {"cycles": self.cycles, "coordinator_rounds": self.coordinator_rounds,
                    "cache_hits": self.cache_hits, "allreduces": self.allreduces,
                    "tensors_allreduced": self.tensors_allreduced,
                    "allreduce_bytes": list(self.allreduce_bytes), "fused": list(self.fused),
                    "broadcasts": self.broadcasts, "errors": self.errors}


class TensorQueue:
    """Requests and entries from framework threads, popped by the background thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._table: dict[str, TensorTableEntry] = {}

    def add(self, request: Request, entry: TensorTableEntry) -> None:
        """Enqueue; a name still pending on this rank is refused."""
        with self._lock:
            if request.name in self._table:
                raise ValueError(f"a collective named {request.name!r} is already pending on "
                                 "this rank; names must be unique until synchronized")
            self._table[request.name] = entry
            self._requests.append(request)

    def pop_requests(self) -> list[Request]:
        """The requests added since the last call."""
        with self._lock:
            out, self._requests = self._requests, []
            return out

    def take(self, names: list[str]) -> list[TensorTableEntry | None]:
        """Remove and return the entries of ``names`` (``None`` for names not here)."""
        with self._lock:
            return [self._table.pop(n, None) for n in names]

    def fail_all(self, error: BaseException) -> None:
        """Complete every pending entry with ``error``."""
        with self._lock:
            entries, self._table, self._requests = list(self._table.values()), {}, []
        for entry in entries:
            entry.error = error
            entry.done.set()


class GlooChannel:
    """The negotiation's messages on the control group (background thread only).

    Request lists go to rank 0 as pickled bytes: an all-reduce (MAX) of their lengths, then a
    gather of the padded bytes (Horovod's Gloo controller gathers lengths, then the bytes);
    the response list comes back as a broadcast of its length, then of its bytes.
    """

    def __init__(self, group: Any, rank: int, size: int) -> None:
        self.group, self.rank, self.size = group, rank, size

    def _allreduce(self, words: list[int], op: Any) -> list[int]:
        t = torch.tensor(words, dtype=torch.int64)
        self.group.allreduce(t, op).wait()
        return [int(x) for x in t.tolist()]

    def bitwise_and(self, words: list[int]) -> list[int]:
        return self._allreduce(words, dist.ReduceOp.BAND)

    def bitwise_or(self, words: list[int]) -> list[int]:
        return self._allreduce(words, dist.ReduceOp.BOR)

    def gather(self, item: RequestList) -> list[RequestList] | None:
        data = pickle.dumps(item)
        longest = self._allreduce([len(data)], dist.ReduceOp.MAX)[0]
        buf = torch.zeros(longest + 8, dtype=torch.uint8)
        buf[:8] = torch.tensor([len(data)], dtype=torch.int64).view(torch.uint8)
        buf[8:8 + len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        opts = dist.GatherOptions()
        opts.rootRank = 0
        outs = [[torch.empty_like(buf) for _ in range(self.size)]] if self.rank == 0 else []
        self.group.gather(outs, [buf], opts).wait()
        if self.rank != 0:
            return None
        lists = []
        for b in outs[0]:
            n = int(b[:8].view(torch.int64).item())
            lists.append(pickle.loads(b[8:8 + n].numpy().tobytes()))
        return lists

    def broadcast(self, item: ResponseList | None) -> ResponseList:
        data = pickle.dumps(item) if self.rank == 0 else b""
        length = torch.tensor([len(data)], dtype=torch.int64)
        self.group.broadcast(length, 0).wait()
        buf = (torch.frombuffer(bytearray(data), dtype=torch.uint8) if self.rank == 0
               else torch.empty(int(length.item()), dtype=torch.uint8))
        self.group.broadcast(buf, 0).wait()
        result: ResponseList = pickle.loads(buf.numpy().tobytes())
        return result


class Engine:
    """One process's background thread, its tensor queue and its counters.

    Args:
        rank, size: this rank and the world size (Horovod's numbering).
        data_group: gloo process group (over Horovod's ranks, numbered alike) for the
            collectives on tensors.
        control_group: gloo process group for the negotiation (used by this thread only).
        cycle_time_ms: the cycle time, ms.
        fusion_threshold_bytes: the effective fusion threshold, bytes.
        cache_capacity, stall_check_s, stall_shutdown_s: see
            :class:`~backends.horovod.negotiation.Controller`.
        trace: record timeline spans.
    """

    def __init__(self, rank: int, size: int, data_group: Any, control_group: Any,
                 cycle_time_ms: float, fusion_threshold_bytes: int,
                 cache_capacity: int, stall_check_s: float, stall_shutdown_s: float,
                 trace: bool = False) -> None:
        self.rank, self.size = rank, size
        self.data_group = data_group
        self.cycle_time_s = cycle_time_ms / 1000.0
        self.queue = TensorQueue()
        self.controller = Controller(rank, size, GlooChannel(control_group, rank, size),
                                     fusion_threshold_bytes, cache_capacity, stall_check_s,
                                     stall_shutdown_s)
        self.buffer = FusionBuffer(fusion_threshold_bytes)
        self.stats = Stats()
        self.tracer = Tracer(rank=rank, enabled=trace)
        self.error: BaseException | None = None
        self._carry: list[Request] = []
        self.noname = itertools.count()  # numbers unnamed collectives, in call order
        self._shutdown = threading.Event()
        self._last_cycle_start = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name=f"horovod-background-{rank}",
                                        daemon=True)
        self._thread.start()

    # -- framework side ---------------------------------------------------------------------

    def enqueue(self, request: Request, entry: TensorTableEntry) -> TensorTableEntry:
        """Hand a collective to the background thread; returns at once."""
        if self.error is not None:
            raise HorovodInternalError(f"Horovod's background thread has stopped: {self.error}")
        if not self._thread.is_alive():
            raise HorovodInternalError("Horovod has been shut down")
        self.queue.add(request, entry)
        if self.tracer.enabled:  # an instant: when the framework handed the tensor over
            now = time.perf_counter()
            self.tracer.trace.record(self.rank, "ENQUEUE", request.name, now, now,
                                     request.numel * entry.tensor.element_size())
        return entry

    def wait(self, entry: TensorTableEntry) -> torch.Tensor:
        """Block until ``entry`` completes; its output, or the error raised."""
        while not entry.done.wait(0.05):
            if not self._thread.is_alive() and not entry.done.is_set():
                self.queue.fail_all(HorovodInternalError(
                    f"Horovod's background thread stopped: {self.error or 'shut down'}"))
        if entry.error is not None:
            raise entry.error
        return entry.output

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Ask every rank to stop (through the negotiation) and join the thread."""
        self._shutdown.set()
        self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        """The background thread is running."""
        return self._thread.is_alive()

    # -- background side --------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while self.run_loop_once():
                pass
            self.queue.fail_all(HorovodInternalError("Horovod has been shut down"))
        except BaseException as exc:  # a peer died, a timeout: fail every handle
            self.error = exc
            self.queue.fail_all(HorovodInternalError(
                f"Horovod's background thread on rank {self.rank} failed: "
                f"{type(exc).__name__}: {exc}"))

    def run_loop_once(self) -> bool:
        """One cycle: sleep, negotiate, perform. False once every rank must stop."""
        tracer = self.tracer if self.tracer.enabled else None
        cycle = self.stats.cycles
        label = f"cycle {cycle}"
        sleep = self._last_cycle_start + self.cycle_time_s - time.perf_counter()
        if sleep > 0:
            with span(tracer, "WAIT", label):
                time.sleep(sleep)
        self._last_cycle_start = time.perf_counter()
        requests = self._carry + self.queue.pop_requests()
        with span(tracer, "NEGOTIATE", label):
            responses, self._carry = self.controller.compute_response_list(
                requests, self._shutdown.is_set())
        self.stats.cycles += 1
        self.stats.coordinator_rounds = self.controller.coordinator_rounds
        self.stats.cache_hits = self.controller.cache_hits
        for response in responses.responses:
            self._perform(response, cycle, tracer)
        return not responses.shutdown

    def _perform(self, response: Response, cycle: int, tracer: Tracer | None) -> None:
        entries = self.queue.take(response.names)
        if response.op == ERROR:
            error = HorovodInternalError(response.error)
            for entry in entries:
                if entry is not None:
                    self.stats.errors += 1
                    entry.error = error
                    entry.done.set()
            return
        present = [e for e in entries if e is not None]
        if len(present) != len(entries):  # cannot happen: every rank requested it
            raise HorovodInternalError(f"rank {self.rank} has no tensor for {response.names}")
        label = f"cycle {cycle}: " + ", ".join(response.names[:3]) + (
            f" (+{len(response.names) - 3})" if len(response.names) > 3 else "")
        if response.op == BROADCAST:
            self._broadcast(present[0], response, label, tracer)
        elif response.op == ALLREDUCE:
            self._allreduce(present, response, cycle, label, tracer)
        for entry in present:
            entry.done.set()

    def _broadcast(self, entry: TensorTableEntry, response: Response, label: str,
                   tracer: Tracer | None) -> None:
        out = entry.output
        with span(tracer, "BROADCAST", label, response.nbytes):
            if out.data_ptr() != entry.tensor.data_ptr():
                out.copy_(entry.tensor)
            if out.numel() > 0 and self.size > 1:
                buf = out if out.is_contiguous() else out.contiguous()
                self.data_group.broadcast(buf, response.root_rank).wait()
                if buf is not out:
                    out.copy_(buf)
        self.stats.broadcasts += 1

    def _allreduce(self, entries: list[TensorTableEntry], response: Response, cycle: int,
                   label: str, tracer: Tracer | None) -> None:
        nbytes = response.nbytes
        average = response.reduce_op == "Average"
        if len(entries) == 1:  # in place on the output, no fusion buffer
            entry = entries[0]
            out = entry.output
            if out.data_ptr() != entry.tensor.data_ptr():
                out.copy_(entry.tensor)
            flat = out if out.is_contiguous() else out.contiguous()
            with span(tracer, "ALLREDUCE", label, nbytes):
                self._reduce(flat, average)
            if flat is not out:
                out.copy_(flat)
        else:
            with span(tracer, "MEMCPY_IN_FUSION_BUFFER", label, nbytes):
                flat = self.buffer.copy_in([e.tensor for e in entries])
            with span(tracer, "ALLREDUCE", label, nbytes):
                self._reduce(flat, average)
            with span(tracer, "MEMCPY_OUT_FUSION_BUFFER", label, nbytes):
                self.buffer.copy_out(flat, [e.output for e in entries])
        self.stats.record_allreduce(cycle, response.dtype, response.names, nbytes)

    def _reduce(self, flat: torch.Tensor, average: bool) -> None:
        if flat.numel() > 0 and self.size > 1:
            self.data_group.allreduce(flat).wait()
        if average:
            if flat.is_floating_point() or flat.is_complex():
                flat.div_(self.size)
            else:
                flat.floor_divide_(self.size)

