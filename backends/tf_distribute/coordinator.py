"""ClusterCoordinator on PyTorch: closures scheduled onto worker processes, retried on failure.

Twin of TF's ``tf.distribute.coordinator.ClusterCoordinator`` (book chapter 19). The
coordinator is the program the user runs (TF's chief). It never trains itself: it **schedules
closures** — a function and its arguments — onto a queue, and one thread per worker task takes
the next closure, sends it to its worker, waits for the answer and takes the next. So workers
pull work at their own pace: a slow worker runs fewer closures, none waits for another, and
the variables they update on the ps tasks change asynchronously.

* :meth:`ClusterCoordinator.schedule` ``(fn, args)`` returns a :class:`RemoteValue` at once
  (TF: ``RemoteValue``); :meth:`RemoteValue.fetch` waits for the closure's result;
* :meth:`~ClusterCoordinator.join` waits for every closure scheduled so far and raises the first
  closure's error; :meth:`~ClusterCoordinator.done` says whether all have finished;
* :meth:`~ClusterCoordinator.create_per_worker_dataset` (TF's per-worker datasets): each worker
  builds its own dataset; a :class:`PerWorkerIterator` passed to a closure is replaced, on the
  worker that runs it, by that worker's own iterator.

Failure (TF: a closure that met ``UnavailableError`` or a ``WorkerPreemptionError`` is put back
on the queue): when a worker process dies — killed, crashed — or stays silent past
``closure_timeout_s`` (it is then killed), the closure it was running goes back to the *front*
of the queue and another worker runs it; the lost worker is named in :attr:`failures` and gets
no more closures. Its updates to the ps tasks are applied once however often a closure is
rerun (:class:`~backends.tf_distribute.ps_strategy.ParameterServer` remembers each update's
token), so every scheduled closure runs to completion exactly once. An error *raised by* a
closure is the user's: it is not retried, it names the worker and the closure, and
:meth:`~ClusterCoordinator.join` raises it. When no worker is left, the closures still queued
fail with :class:`~backends.tf_distribute.ps_channel.UnavailableError` naming every worker.
Times are seconds.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Listener
from typing import Any

from backends.tf_distribute.ps_channel import (
    CONTEXT,
    UnavailableError,
    accept,
    connect,
    receive,
    send,
)
from backends.tf_distribute.ps_strategy import ParameterServerStrategy, Task

CLOSURE_TIMEOUT_S = 30.0
"""How long a worker may run one closure before it counts as lost, s."""

POLL_S = 0.05
"""How often a waiting worker thread checks that its worker is still alive, s."""


class ClosureError(RuntimeError):
    """A closure raised on a worker; the message names the worker and the closure, and holds
    the worker's traceback."""


class RemoteValue:
    """TF's ``RemoteValue``: the future result of one scheduled closure."""

    def __init__(self, closure_id: int) -> None:
        self.closure_id = closure_id
        self._event = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def _set(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value, self._error = value, error
        self._event.set()

    def done(self) -> bool:
        """Whether the closure has finished (or failed)."""
        return self._event.is_set()

    def fetch(self, timeout_s: float | None = None) -> Any:
        """The closure's return value, once it has one; raises the closure's error.

        Raises:
            TimeoutError: still running after ``timeout_s`` seconds.
        """
        if not self._event.wait(timeout_s):
            raise TimeoutError(f"closure {self.closure_id} still running after {timeout_s} s")
        if self._error is not None:
            raise self._error
        return self._value


@dataclass
class Closure:
    """One scheduled function call and what became of it: ``attempts`` lists the worker of
    each try (the last one completed it, if ``value`` is done)."""

    id: int
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    value: RemoteValue
    attempts: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class PerWorkerIterator:
    """TF's ``PerWorkerDistributedIterator``: a closure argument standing for "the iterator of
    ``dataset_fn(worker_index)`` on the worker that runs me", built there once and kept."""

    dataset_id: int
    dataset_fn: Callable[[int], Any]


@dataclass(frozen=True)
class PerWorkerDataset:
    """TF's per-worker dataset (``create_per_worker_dataset``): each worker builds
    ``dataset_fn(worker_index)`` for itself; :meth:`iterator` is what closures take."""

    dataset_id: int
    dataset_fn: Callable[[int], Any]

    def iterator(self) -> PerWorkerIterator:
        """TF: ``iter(per_worker_dataset)``."""
        return PerWorkerIterator(self.dataset_id, self.dataset_fn)


class ClusterCoordinator:
    """TF's ``ClusterCoordinator(strategy)``: a closure queue and one thread per worker."""

    def __init__(self, strategy: ParameterServerStrategy,
                 closure_timeout_s: float = CLOSURE_TIMEOUT_S) -> None:
        self.strategy = strategy
        self.closure_timeout_s = closure_timeout_s
        self._queue: deque[Closure] = deque()
        self._cond = threading.Condition()
        self._dataset_ids = itertools.count()
        self._pending = 0
        self._error: BaseException | None = None
        self._stopping = False
        self.closures: list[Closure] = []
        self.failures: list[str] = []
        """One line per worker lost, naming it and the closure it was running."""
        self.running: dict[int, int] = {}
        """Worker index → the closure it has started (after its ``started`` notice)."""
        self._alive = {t.index for t in strategy.cluster.workers}
        self._threads = [threading.Thread(target=self._worker_loop, args=(t,), daemon=True,
                                          name=f"coordinator-{t.name}")
                         for t in strategy.cluster.workers]
        for thread in self._threads:
            thread.start()

    # -- the user's side ------------------------------------------------------------------

    def schedule(self, fn: Callable[..., Any], args: Sequence[Any] = (),
                 kwargs: dict[str, Any] | None = None) -> RemoteValue:
        """Queue ``fn(*args, **kwargs)`` (``fn`` a module-level function: it travels by name)
        to run on whichever worker is free first; returns its :class:`RemoteValue` now."""
        with self._cond:
            if self._error is not None:
                raise self._error
            cid = len(self.closures)
            closure = Closure(cid, fn, tuple(args), dict(kwargs or {}), RemoteValue(cid))
            self.closures.append(closure)
            self._pending += 1
            if not self._alive:
                self._fail(closure, self._no_worker_error())
            else:
                self._queue.append(closure)
            self._cond.notify_all()
            return closure.value

    def join(self, timeout_s: float | None = None) -> None:
        """Wait until every closure scheduled so far has finished; raise the first error.

        Raises:
            TimeoutError: closures still pending after ``timeout_s`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._pending == 0, timeout_s):
                raise TimeoutError(f"{self._pending} closures still pending after "
                                   f"{timeout_s} s")
            if self._error is not None:
                raise self._error

    def done(self) -> bool:
        """Whether every closure scheduled so far has finished."""
        with self._cond:
            return self._pending == 0

    def fetch(self, values: Sequence[RemoteValue]) -> list[Any]:
        """Each value's result (TF's ``coordinator.fetch``)."""
        return [v.fetch() for v in values]

    def create_per_worker_dataset(self, dataset_fn: Callable[[int], Any]) -> PerWorkerDataset:
        """A dataset that each worker builds for itself: ``dataset_fn(worker_index)``."""
        return PerWorkerDataset(next(self._dataset_ids), dataset_fn)

    def shutdown(self) -> None:
        """Stop the worker threads (their workers are told to exit)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=2.0)

    def __enter__(self) -> ClusterCoordinator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- the worker threads ---------------------------------------------------------------

    def _fail(self, closure: Closure, error: BaseException) -> None:
        """Under the lock: ``closure`` ends with ``error``; the first error cancels the rest."""
        closure.value._set(error=error)
        self._pending -= 1
        if self._error is None:
            self._error = error
            while self._queue:
                self._fail(self._queue.popleft(), error)

    def _no_worker_error(self) -> UnavailableError:
        return UnavailableError("no worker left to run closures: " + "; ".join(self.failures))

    def _next(self) -> Closure | None:
        with self._cond:
            self._cond.wait_for(lambda: self._queue or self._stopping)
            return None if self._stopping else self._queue.popleft()

    def _worker_loop(self, task: Task) -> None:
        """One worker's thread: connect, then take a closure, run it there, repeat."""
        try:
            conn = connect(task.address, self.strategy.cluster.authkey)
        except OSError as exc:
            self._lose(task, None, f"unreachable ({exc})")
            return
        with conn:
            while (closure := self._next()) is not None:
                closure.attempts.append(task.index)
                lost = self._run(task, conn, closure)
                if lost is not None:
                    self._lose(task, closure, lost)
                    return
            with contextlib.suppress(OSError):
                send(conn, ("stop",))

    def _run(self, task: Task, conn: Connection, closure: Closure) -> str | None:
        """Run ``closure`` on ``task``; ``None`` when it ended, else why the worker is lost."""
        deadline = time.monotonic() + self.closure_timeout_s
        try:
            send(conn, ("run", closure.id, closure.fn, closure.args, closure.kwargs))
            while True:
                if conn.poll(POLL_S):
                    kind, *rest = receive(conn)
                    if kind == "started":
                        with self._cond:
                            self.running[task.index] = closure.id
                        continue
                    break
                if not task.process.is_alive():
                    return f"died (exit code {task.process.exitcode})"
                if time.monotonic() > deadline:
                    task.process.kill()
                    return f"was silent past {self.closure_timeout_s:g} s"
        except (EOFError, OSError) as exc:
            task.process.join(timeout=1.0)
            return f"died (exit code {task.process.exitcode}; {type(exc).__name__})"
        with self._cond:
            self.running.pop(task.index, None)
            if kind == "done":
                closure.value._set(rest[0])
                self._pending -= 1
            else:
                self._fail(closure, ClosureError(
                    f"closure {closure.id} ({closure.fn.__name__}) failed on {task.name}: "
                    f"{rest[0]}\n--- traceback on {task.name} ---\n{rest[1]}"))
            self._cond.notify_all()
        return None

    def _lose(self, task: Task, closure: Closure | None, why: str) -> None:
        """``task`` is gone: put its closure back at the front of the queue (TF's retry), or
        fail everything queued when it was the last worker."""
        with self._cond:
            self.running.pop(task.index, None)
            self._alive.discard(task.index)
            line = f"{task.name} (pid {task.process.pid}) {why}"
            if closure is not None:
                line += f" while running closure {closure.id}; retried elsewhere"
            self.failures.append(line)
            if closure is not None:
                self._queue.appendleft(closure)
            if not self._alive:
                while self._queue:
                    self._fail(self._queue.popleft(), self._no_worker_error())
            self._cond.notify_all()


# ---- a worker task --------------------------------------------------------------------------

_datasets: dict[int, Iterator[Any]] = {}
"""This worker's iterators of the per-worker datasets, by dataset id."""


def _resolve(arg: Any) -> Any:
    """A closure argument as the worker sees it: its own iterator for a per-worker one."""
    if isinstance(arg, PerWorkerIterator):
        if arg.dataset_id not in _datasets:
            _datasets[arg.dataset_id] = iter(arg.dataset_fn(CONTEXT.worker_index))
        return _datasets[arg.dataset_id]
    return arg


def worker_task_main(listener: Listener, index: int) -> None:
    """A worker task: serve a coordinator's closures one at a time until it says stop or
    hangs up, then wait for the next coordinator (a worker outlives its coordinators)."""
    CONTEXT.worker_index = index
    while True:
        with accept(listener) as conn, contextlib.suppress(EOFError, OSError):
            serve_coordinator(conn)


def serve_coordinator(conn: Connection) -> None:
    """Run each closure ``conn`` sends: say ``started``, run it, answer ``done`` with its
    value or ``error`` with its message and traceback."""
    while True:
        kind, *rest = receive(conn)
        if kind == "stop":
            return
        closure_id, fn, args, kwargs = rest
        send(conn, ("started", closure_id))
        CONTEXT.closure_id, CONTEXT.updates = closure_id, 0
        try:
            args = tuple(_resolve(a) for a in args)
            send(conn, ("done", fn(*args, **kwargs)))
        except Exception as exc:
            send(conn, ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        finally:
            CONTEXT.closure_id = None
