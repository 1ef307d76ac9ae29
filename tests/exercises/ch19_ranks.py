"""What the grader of exercise 19.3 plugs the student's rules into.

* :class:`InProcessPs` — ps tasks served by threads of the grading process: the twin's
  :class:`~backends.tf_distribute.ps_strategy.ParameterServer` and ``serve_connection``, with
  the once-only check replaced by a given ``apply_once`` (the ps task processes of a
  ``LocalCluster`` run the twin's own rule, which a test cannot reach);
* :class:`GradedCoordinator` — the twin's ``ClusterCoordinator`` whose lost worker's closures
  are chosen by a given ``closures_to_retry``, and which counts the completions of each closure;
* :func:`counted_step` — the closure the workers run (module-level: it travels by name).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from multiprocessing.connection import Client, Listener
from typing import Any

import torch

from backends.tf_distribute.coordinator import ClusterCoordinator
from backends.tf_distribute.ps_channel import accept, channels_close, request, task_name
from backends.tf_distribute.ps_strategy import (
    ParameterServer,
    ParameterServerStrategy,
    Shard,
    ShardedVariable,
    row_blocks,
    serve_connection,
)

ApplyOnce = Callable[[set[tuple[int, int]], tuple[int, int] | None], bool]
ClosuresToRetry = Callable[[Mapping[int, int], int], list[int]]


class StudentParameterServer(ParameterServer):
    """The twin's ps store, applying an update when ``apply_once`` says so."""

    def __init__(self, apply_once: ApplyOnce) -> None:
        super().__init__()
        self.apply_once = apply_once

    def _once(self, name: str, token: tuple[int, int] | None) -> bool:
        return self.apply_once(self.tokens.setdefault(name, set()), token)


class InProcessPs:
    """``n`` ps tasks listening on loopback, each a :class:`StudentParameterServer` served by
    one thread per connection. Use as a context manager."""

    def __init__(self, n: int, authkey: bytes, apply_once: ApplyOnce) -> None:
        self.authkey = authkey
        self.stores = [StudentParameterServer(apply_once) for _ in range(n)]
        self.listeners = [Listener(("127.0.0.1", 0), authkey=authkey) for _ in range(n)]
        self.addresses = tuple(listener.address for listener in self.listeners)
        self._stopping = False

        def serve(listener: Listener, store: ParameterServer) -> None:
            while not self._stopping:
                with contextlib.suppress(OSError, EOFError):
                    conn = accept(listener)
                    threading.Thread(target=serve_connection, args=(conn, store),
                                     daemon=True).start()

        for listener, store in zip(self.listeners, self.stores, strict=True):
            threading.Thread(target=serve, args=(listener, store), daemon=True).start()

    def variable(self, name: str, value: torch.Tensor) -> ShardedVariable:
        """``value`` (``rows × cols``) in row blocks over these ps tasks, round-robin."""
        rows, cols = value.shape
        blocks = row_blocks(rows, min(rows, len(self.stores)))
        shards = tuple(Shard(f"{name}/part_{k}", k, b, e) for k, (b, e) in enumerate(blocks))
        for s in shards:
            request(task_name("ps", s.ps), self.addresses[s.ps], self.authkey,
                    ("create", s.name, value[s.begin:s.end].clone()))
        return ShardedVariable(name, rows, cols, shards, self.addresses, self.authkey)

    def close(self) -> None:
        """Stop accepting (a last connection wakes each accepting thread) and close."""
        self._stopping = True
        channels_close(list(self.addresses))
        for listener in self.listeners:
            with contextlib.suppress(OSError, EOFError):
                Client(listener.address, authkey=self.authkey).close()
            listener.close()

    def __enter__(self) -> InProcessPs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GradedCoordinator(ClusterCoordinator):
    """The twin's coordinator; a lost worker's closures are those ``closures_to_retry``
    names, put back at the front of the queue in its order. ``completions`` counts how often
    each closure ran to its end."""

    def __init__(self, strategy: ParameterServerStrategy,
                 closures_to_retry: ClosuresToRetry) -> None:
        self.closures_to_retry = closures_to_retry
        self.in_flight: dict[int, int] = {}
        self.completions: Counter[int] = Counter()
        super().__init__(strategy)  # starts the worker threads

    def _run(self, task: Any, conn: Any, closure: Any) -> str | None:
        with self._cond:
            self.in_flight[closure.id] = task.index
        lost = super()._run(task, conn, closure)
        if lost is None:
            with self._cond:
                self.in_flight.pop(closure.id, None)
                self.completions[closure.id] += 1
        return lost

    def _lose(self, task: Any, closure: Any, why: str) -> None:
        with self._cond:  # a reentrant lock: the twin's _lose takes it again
            retry = list(self.closures_to_retry(dict(self.in_flight), task.index))
            for cid in retry:
                self.in_flight.pop(cid, None)
            for cid in reversed(retry):
                self._queue.appendleft(self.closures[cid])
            super()._lose(task, None, why)


def counted_step(counter: ShardedVariable, ledger: ShardedVariable, slot: int,
                 pause_s: float) -> int:
    """A closure of two updates: +1 to ``counter`` (the attempt's first update), a pause (a
    kill lands here), +1 to row ``slot`` of ``ledger`` (its second); returns ``slot``."""
    counter.assign_add(torch.ones(1, 1))
    time.sleep(pause_s)
    ledger.scatter_add(torch.tensor([slot]), torch.ones(1, 1))
    return slot
