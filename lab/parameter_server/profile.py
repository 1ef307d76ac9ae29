"""The code's costs, measured on one process: the van's and server's software, a gradient.

:func:`profile_costs` times coding a message header, waking a waiting thread and a server
handling a push or a pull of ``n`` values (the :class:`~backends.parameter_server.KVStore`
called directly) → :class:`~simulator.parameter_server.PSCosts`; :func:`profile_compute` times
a worker's gradient, each call after a short sleep, as a worker computes after a wait — the
per-layer compute profile of DESIGN.md, for this model.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from simulator.parameter_server import PSCosts


def _median_time(fn: Callable[[], Any], repeats: int = 7, inner: int = 50) -> float:
    """Median over ``repeats`` of the mean time of ``inner`` back-to-back calls, s."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def fit_line(sizes: list[int], times: list[float]) -> tuple[float, float]:
    """Least-squares ``t = a + b·n`` (a, b ≥ 0)."""
    b, a = np.polyfit(np.asarray(sizes, float), np.asarray(times, float), 1)
    return max(float(a), 0.0), max(float(b), 0.0)


def profile_costs(repeats: int = 7, anysource_s: float = 0.0) -> PSCosts:
    """The van's and the server's software costs, measured in this one process
    (``anysource_s`` from :func:`measure_anysource`, which needs a launch)."""
    import torch

    from backends.parameter_server.kv_app import KVStore
    from backends.parameter_server.message import Message, Meta
    from backends.parameter_server.updaters import SGD

    torch.set_num_threads(1)

    def message_round() -> None:  # what both sides do per message besides moving bytes
        msg = Message(Meta(recipient=1, push=1), keys=torch.arange(4), vals=torch.zeros(4))
        header = msg.seal().meta.pack()
        got = Message(Meta.unpack(header))
        got.vals = torch.empty(got.meta.nvals)

    message_s = _median_time(message_round, repeats) / 2

    class _Server:  # a stand-in that only builds the response, as KVServer.response does
        def response(self, req: Any, vals: Any = None, clock: int = -1) -> None:
            Message(Meta(recipient=0, clock=clock),
                    vals=vals if vals is not None else torch.empty(0)).seal()

    sizes = [16, 256, 2048, 16384]
    n_keys = max(sizes)
    push_t, pull_t, apply_t = [], [], []
    for n in sizes:
        keys = torch.arange(n)
        store = KVStore(torch.zeros(n_keys), 0, SGD(0.1), "async", 1, [9])
        push = Message(Meta(sender=9, push=1, clock=0), keys=keys, vals=torch.ones(n))
        pull = Message(Meta(sender=9, pull=1), keys=keys)
        push_t.append(_median_time(lambda p=push, s=store: s(p, _Server()), repeats))  # type: ignore[misc]
        pull_t.append(_median_time(lambda p=pull, s=store: s(p, _Server()), repeats))  # type: ignore[misc]
        rule, w, g = SGD(0.1), torch.zeros(n_keys), torch.ones(n)
        apply_t.append(_median_time(lambda r=rule, w=w, k=keys, g=g: r(w, k, g), repeats))  # type: ignore[misc]
    push_s, push_per = fit_line(sizes, push_t)
    pull_s, pull_per = fit_line(sizes, pull_t)
    _, apply_per = fit_line(sizes, apply_t)
    return PSCosts(message_s=message_s, anysource_s=anysource_s, wakeup_s=_wakeup_s(repeats),
                   push_s=push_s,
                   push_per_value_s=push_per, pull_s=pull_s, pull_per_value_s=pull_per,
                   apply_per_value_s=apply_per)


def _wakeup_s(repeats: int, rounds: int = 200) -> float:
    """Half the round trip of two threads handing a token back and forth, s."""
    cond, turn = threading.Condition(), [0]

    def other() -> None:
        for _ in range(rounds * repeats):
            with cond:
                while turn[0] != 1:
                    cond.wait()
                turn[0] = 0
                cond.notify()

    thread = threading.Thread(target=other, daemon=True)
    thread.start()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(rounds):
            with cond:
                turn[0] = 1
                cond.notify()
                while turn[0] != 0:
                    cond.wait()
        samples.append((time.perf_counter() - start) / rounds / 2)
    thread.join()
    return statistics.median(samples)


AFTER_WAIT_S = 0.002
"""How long the profiling process sleeps before each timed gradient, s: in a run a worker
computes right after it was woken by its pull's answer, a few hundred µs to a few ms after it
last ran, while the other processes had the cores."""


def profile_compute(cfg: Any, after_wait_s: float = AFTER_WAIT_S, repeats: int = 9
                    ) -> np.ndarray:
    """Each worker's gradient time per iteration, ``[iterations, workers]`` s, measured in
    this one process: each worker's shard of the first batches, each call timed alone after
    the process slept ``after_wait_s`` (as a worker computes after waiting for its pull), the
    median of ``repeats`` calls per batch and of the batches per worker kept. A call straight
    after another finds the caches warm and runs 1.5 times as fast on this machine (MLP:
    about 140 against 210 µs); ``after_wait_s=0`` times them back to back."""
    import torch

    from simulator.parameter_server import batch_rows

    torch.set_num_threads(1)
    model = cfg.build_model()
    w_full = model.init()
    per_worker = []
    for w in range(cfg.workers):
        times = []
        for t in range(min(cfg.iterations, 6)):
            rows = batch_rows(t, cfg.batch_size, model.num_examples, w, cfg.workers)
            keys = model.keys(rows)
            sub = w_full[keys]
            model.grad(sub, keys, rows, cfg.batch_size)  # warm-up: allocations, first call
            calls = []
            for _ in range(repeats):
                if after_wait_s > 0:
                    time.sleep(after_wait_s)
                start = time.perf_counter()
                model.grad(sub, keys, rows, cfg.batch_size)
                calls.append(time.perf_counter() - start)
            times.append(statistics.median(calls))
        per_worker.append(statistics.median(times))
    return np.broadcast_to(np.array(per_worker), (cfg.iterations, cfg.workers)).copy()
