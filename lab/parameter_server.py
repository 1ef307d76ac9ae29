"""The parameter server, predicted and measured side by side (book ch. 3).

Prediction needs two kinds of primitives, neither measured on a parameter-server run:

* the machine's, from the calibration file (:mod:`lab.calibrate`): point-to-point α and B, the
  shared-bus bandwidth and busy latency of concurrent loopback messages, and the core count;
* the extra of a receive from any source (:func:`measure_anysource`, ping-pong);
* or, instead of the calibration's network terms, the van's messages
  (:func:`measure_van_link`, one launch at the run's world size): a request and its echo
  through the lab's own van, customer and app (:func:`app_echo`; or bare gloo sends shaped as
  the van's, :func:`van_echo`), from ``k`` senders to one node (the fan-in a server or worker
  has), timed as the CPU each message costs — on loopback moving a message is work of the
  host's cores. It counts that work but not a message's wait for a core on an oversubscribed
  host; on a 2-core machine it predicts too fast (``benchmarks/ps_accuracy.py --van`` prints
  both);
* the code's, measured here on **one process** (:func:`profile_costs`): coding a message
  header, waking a waiting thread, a server handling a push or a pull of ``n`` values (the
  :class:`~backends.parameter_server.KVStore` called directly), and a worker's gradient
  (:func:`profile_compute`, each call after a short sleep, as a worker computes after a wait)
  — the per-layer compute profile of DESIGN.md, for this model.

:func:`predict` builds :class:`simulator.parameter_server.PSSpec` from a
:class:`~backends.parameter_server.PSConfig` and these costs and simulates it on
``cluster_from_entry`` with the machine's cores shared by all ``1 + S + W`` ranks
(:class:`~simulator.parameter_server.CpuPool`): on a 2-core laptop five ranks oversubscribe the
cores, and the model says so instead of hiding it. Given a van link it runs on
:func:`~simulator.parameter_server.van_cluster` and spends each message's measured CPU on those
cores. :func:`compare` runs the real twin and the prediction for one configuration and returns
both (time per iteration, throughput, staleness, idle time).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from simulator.core.calibration import CalibrationEntry, find_entry
from simulator.host import cluster_from_entry
from simulator.parameter_server import (
    ZERO_COST_LINK_BPS,
    PSCosts,
    PSSpec,
    PSTimeline,
    SparseLRData,
    VanLink,
    dense_slices,
    simulate,
    sparse_lr_slices,
    straggler_delays,
    van_cluster,
)


def _median_time(fn: Callable[[], Any], repeats: int = 7, inner: int = 50) -> float:
    """Median over ``repeats`` of the mean time of ``inner`` back-to-back calls, s."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def _line(sizes: list[int], times: list[float]) -> tuple[float, float]:
    """Least-squares ``t = a + b·n`` (a, b ≥ 0)."""
    b, a = np.polyfit(np.asarray(sizes, float), np.asarray(times, float), 1)
    return max(float(a), 0.0), max(float(b), 0.0)


def anysource_ping_pong(repeats: int = 9, rounds: int = 100) -> tuple[float, float]:
    """Rank function: ranks 0 and 1 ping-pong a header, receiving from a named source, then
    from any source, the two interleaved repeat by repeat so that a noisy moment spoils both
    alike; the other ranks wait. Returns half the named round trip (median) and that plus the
    median of the repeats' differences, s."""
    import torch
    import torch.distributed as dist

    from simulator.parameter_server import HEADER_FIELDS

    rank = dist.get_rank()
    header = torch.zeros(HEADER_FIELDS, dtype=torch.int64)
    plain, extra = [], []
    for _ in range(repeats + 1):
        pair = []
        for anysource in (False, True):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(rounds if rank < 2 else 0):
                if rank == 0:
                    dist.send(header, 1)
                    dist.recv(header, None if anysource else 1)
                else:
                    dist.recv(header, None if anysource else 0)
                    dist.send(header, 0)
            pair.append((time.perf_counter() - start) / rounds / 2)
        plain.append(pair[0])
        extra.append(pair[1] - pair[0])
    named = statistics.median(plain[1:])
    return named, named + statistics.median(extra[1:])


VAN_PAYLOAD_SIZES = (0, 4096, 16384, 65536)
"""Payload bytes of the van echo (0: a header alone). The PS messages of this lab are a
112-byte header and payloads of a few KiB."""


def van_echo(fan_in: int, payloads: tuple[int, ...] = VAN_PAYLOAD_SIZES,
             rounds: int = 300, repeats: int = 5) -> list[float]:
    """Rank function: ``fan_in`` senders (ranks ``2 … 1+k``) each send rank 1 a message shaped
    as the van sends it — a header, received *from any source*, then a payload of ``n`` bytes
    from the header's sender (none for ``n = 0``) — and rank 1 echoes it back; each sender
    receives the echo on a receiving thread and hands it to its sending thread, as a van does.
    The other ranks of the world wait, as a run's idle nodes do.

    Returns, per payload size, this rank's CPU seconds (user + system, all its threads) per
    one-way message, the median over ``repeats`` of ``rounds`` round trips per sender (0 on
    the ranks that take no part). On loopback a message is work of the host's cores — the
    socket copies, gloo's loop thread, the thread wake-ups — and with several senders a
    message often arrives before its receive is posted, which costs more.
    """
    import torch
    import torch.distributed as dist

    from simulator.parameter_server import HEADER_FIELDS

    rank = dist.get_rank()
    active = 1 <= rank < 2 + fan_in
    per_round = max(rounds // repeats, 1)
    out = []
    for n in payloads:
        header = torch.zeros(HEADER_FIELDS, dtype=torch.int64)
        payload = torch.zeros(max(n, 1), dtype=torch.uint8)
        samples = []
        for _ in range(repeats):
            dist.barrier()
            cpu = time.process_time()
            if rank == 1:
                for _ in range(per_round * fan_in):
                    src = dist.recv(header, None, tag=1)
                    if n:
                        dist.recv(payload, src, tag=2)
                    dist.send(header, src, tag=3)
                    if n:
                        dist.send(payload, src, tag=4)
            elif active:
                _echo_sender(header, payload, n, per_round)
            samples.append((time.process_time() - cpu) / (2 * per_round * fan_in)
                           if active else 0.0)
        out.append(statistics.median(samples))
    return out


def _echo_sender(header: Any, payload: Any, n: int, rounds: int) -> None:
    """A sender of :func:`van_echo`: sends on this thread, receives on another."""
    import torch
    import torch.distributed as dist

    got, cond = [0], threading.Condition()
    back_h, back_p = torch.empty_like(header), torch.empty_like(payload)

    def receiving() -> None:
        for _ in range(rounds):
            dist.recv(back_h, None, tag=3)
            if n:
                dist.recv(back_p, 1, tag=4)
            with cond:
                got[0] += 1
                cond.notify()

    thread = threading.Thread(target=receiving, daemon=True)
    thread.start()
    for i in range(rounds):
        dist.send(header, 1, tag=1)
        if n:
            dist.send(payload, 1, tag=2)
        with cond:
            while got[0] <= i:
                cond.wait(1.0)
    thread.join()


def app_echo(fan_ins: tuple[int, ...], rounds: int = 300,
             payloads: tuple[int, ...] = VAN_PAYLOAD_SIZES, repeats: int = 5
             ) -> list[list[float]]:
    """Rank function: the van's request–response round trip, through this lab's own
    transport and app layer (PS-Lite's ``SimpleApp``), from ``k`` senders to one node.

    The world is a postoffice of one server (rank 1) and ``world − 2`` workers; the server's
    request handle answers each request with its own values (an echo). For each fan-in ``k``
    and payload of ``n`` bytes (0: a header alone), workers ``0 … k−1`` each send requests of
    ``n`` bytes and wait for the answer (:meth:`SimpleApp.wait`), one at a time; the others
    idle, as a run's idle nodes do. So every message is what a training run's is — a header
    coded and received from any source by the van's receiving thread, its payload, the
    customer's bookkeeping, a waiting thread woken — with no training in it.

    Returns, per fan-in and payload size, this rank's CPU seconds (user + system, all its
    threads) per one-way message, the median over ``repeats`` of ``rounds // repeats`` round
    trips per sender (0 on the ranks that take no part): the server's from the barrier until
    it has answered every request, a sender's until its last answer came back.
    """
    import torch
    import torch.distributed as dist

    from backends.parameter_server.kv_app import SimpleApp
    from backends.parameter_server.message import Message
    from backends.parameter_server.postoffice import ALL_GROUPS, Postoffice

    po = Postoffice(1, dist.get_world_size() - 2, 1, timeout_s=60.0)
    app = SimpleApp(0, po)
    answered, cond = [0], threading.Condition()

    def echo(msg: Message, server: SimpleApp) -> None:
        server.response(msg, msg.vals if msg.meta.nvals else None)
        with cond:
            answered[0] += 1
            cond.notify()

    app.request_handle = echo
    po.start()
    per_round = max(rounds // repeats, 1)
    out: list[list[float]] = []
    for k in fan_ins:
        active = po.is_server or (po.is_worker and po.my_rank < k)
        row = []
        for n in payloads:
            vals = torch.zeros(n // 4) if n else None
            samples = []
            for _ in range(repeats):
                with cond:
                    answered[0] = 0
                po.barrier(ALL_GROUPS)
                cpu = time.process_time()
                if po.is_server:
                    with cond:
                        while answered[0] < per_round * k:
                            cond.wait(1.0)
                elif active:
                    for _ in range(per_round):
                        app.wait(app.request([1], vals))
                samples.append((time.process_time() - cpu) / (2 * per_round * k)
                               if active else 0.0)
            row.append(statistics.median(samples))
        out.append(row)
    po.finalize()
    return out


def measure_van_link(world: int, fan_ins: tuple[int, ...] | None = None,
                     rounds: int = 300, through: str = "app") -> VanLink:
    """The van's messages at ``world`` ranks (:class:`~simulator.parameter_server.VanLink`):
    for each fan-in ``k`` (default ``1 … world − 2``), the CPU of a header alone and the
    payload line ``a + n/B`` fitted to the payloads' extra CPU (least squares, a, 1/B ≥ 0),
    from :func:`app_echo` (``through="app"``: the lab's van, customer and app, as a run
    sends them) or :func:`van_echo` (``"gloo"``: bare gloo sends and receives shaped as the
    van's) — one launch of ``world`` processes."""
    from backends.launch import spawn

    fan_ins = fan_ins or tuple(range(1, max(world - 1, 2)))
    if max(fan_ins) > world - 2 or min(fan_ins) < 1:
        raise ValueError(f"a fan-in must be between 1 and {world - 2} at world {world}")
    if through not in ("app", "gloo"):
        raise ValueError(f"through must be 'app' or 'gloo', got {through!r}")
    outs = spawn(app_echo if through == "app" else _van_echo_all, max(world, 3), fan_ins,
                 rounds, backend="gloo", timeout=60, deadline=60 + 10 * len(fan_ins))
    header, payload, rate = [], [], []
    for i in range(len(fan_ins)):
        cpu = np.sum([o[i] for o in outs], axis=0)  # CPU per message, all ranks taking part
        header.append(float(cpu[0]))
        sizes = [n for n in VAN_PAYLOAD_SIZES if n]
        a, b = _line(sizes, [float(c) - cpu[0] for c in cpu[1:]])
        payload.append(a)
        rate.append(1.0 / b if b > 0 else ZERO_COST_LINK_BPS)
    return VanLink(tuple(header), tuple(payload), tuple(rate))


def _van_echo_all(fan_ins: tuple[int, ...], rounds: int) -> list[list[float]]:
    """Rank function: :func:`van_echo` at each fan-in, in one launch."""
    return [van_echo(k, rounds=rounds) for k in fan_ins]


def measure_anysource(world: int) -> float:
    """What a receive from any source costs more than a named one, with ``world`` ranks, s."""
    from backends.launch import spawn

    plain, anysource = spawn(anysource_ping_pong, world, backend="gloo", timeout=30)[0]
    return max(float(anysource) - float(plain), 0.0)


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
    push_s, push_per = _line(sizes, push_t)
    pull_s, pull_per = _line(sizes, pull_t)
    _, apply_per = _line(sizes, apply_t)
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


def spec_for(cfg: Any, costs: PSCosts, compute_s: np.ndarray, cores: float,
             van: VanLink | None = None) -> PSSpec:
    """The simulated twin's spec of a real :class:`~backends.parameter_server.PSConfig`."""
    if cfg.model == "mlp":
        slices = dense_slices(cfg.num_keys(), cfg.servers, cfg.workers, cfg.iterations,
                              cfg.splits)
    else:
        data = SparseLRData(cfg.features, cfg.examples, cfg.nnz, cfg.seed, cfg.zipf)
        slices = sparse_lr_slices(data, cfg.servers, cfg.workers, cfg.iterations,
                                  cfg.batch_size, cfg.splits)
    delays = straggler_delays(cfg.seed, cfg.iterations, cfg.workers, cfg.straggler_mean_s,
                              cfg.slow_workers)
    return PSSpec(cfg.servers, cfg.workers, cfg.consistency, cfg.tau, slices,
                  cfg.model == "mlp", compute_s, delays, costs, cores, van)


def predict(cfg: Any, entry: CalibrationEntry, costs: PSCosts,
            compute_s: np.ndarray | None = None, van: VanLink | None = None) -> PSTimeline:
    """The simulated run of ``cfg`` on this machine's calibrated twin; with ``van`` (from
    :func:`measure_van_link` at the run's world size) its messages take the van's measured
    times on the shared cores instead of the calibration's α, B and busy latency."""
    compute = profile_compute(cfg) if compute_s is None else compute_s
    cluster = cluster_from_entry(entry, world_size=1 + cfg.servers + cfg.workers)
    if van is not None:
        cluster = van_cluster(cluster)
    return simulate(cluster, spec_for(cfg, costs, compute, entry.cores, van), trace=False)[0]


def compare(cfg: Any, calibration: str | Path | None = None, costs: PSCosts | None = None,
            repeats: int = 1, van: VanLink | None = None) -> dict[str, Any]:
    """Measure ``cfg`` on real processes (``repeats`` launches) and predict it; one record."""
    from backends.parameter_server import train

    entry = find_entry(1 + cfg.servers + cfg.workers, "gloo", path=calibration)
    if costs is None:
        costs = profile_costs()
        if van is None:
            costs = replace(costs, anysource_s=measure_anysource(1 + cfg.servers + cfg.workers))
    runs = [train(cfg) for _ in range(repeats)]
    predicted = predict(cfg, entry, costs, van=van)
    measured = statistics.median(r.time_per_iteration_s for r in runs)
    return {"servers": cfg.servers, "workers": cfg.workers, "world": 1 + cfg.servers
            + cfg.workers, "model": cfg.model, "consistency": cfg.consistency, "tau": cfg.tau,
            "predicted_s": predicted.time_per_iteration_s(),
            "measured_median_s": measured,
            "rel_error": (predicted.time_per_iteration_s() - measured) / measured,
            "predicted_throughput": predicted.throughput(cfg.batch_size),
            "measured_throughput": statistics.median(r.throughput for r in runs),
            "predicted_max_staleness": int(predicted.staleness.max()),
            "measured_max_staleness": max(r.max_staleness for r in runs),
            "predicted_idle_s": predicted.idle_time_s(),
            "measured_idle_s": statistics.median(r.idle_time_s for r in runs)}


def costs_dict(costs: PSCosts) -> dict[str, float]:
    """The costs as a plain dict (µs where it helps reading)."""
    return asdict(costs)


__all__ = ["app_echo", "compare", "costs_dict", "measure_anysource", "measure_van_link",
           "predict", "profile_compute", "profile_costs", "spec_for", "van_echo"]
