"""Training on the parameter server: one function per role, and a launcher.

    from backends.parameter_server import PSConfig, train
    result = train(PSConfig(servers=2, workers=2, model="sparse_lr", consistency="ssp", tau=2))
    result.time_per_iteration_s, result.losses

:func:`run_node` is the rank function (run it under :func:`backends.launch.spawn`, or
``torchrun``): rank 0 becomes the scheduler, ranks ``1 … S`` servers with a :class:`KVStore`,
the rest workers running :func:`worker_loop`. Every worker records, per iteration, when it
started and ended, its loss and the staleness of the weights it pulled (``t`` minus the
slowest worker clock the servers reported). Straggler delays come from
:func:`simulator.parameter_server.straggler_delays`, the same draws the simulated twin uses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from backends.parameter_server.kv_app import KVServer, KVStore, KVWorker
from backends.parameter_server.models import MLPModel, Model, SparseLRModel
from backends.parameter_server.postoffice import Postoffice
from backends.parameter_server.updaters import make_rule
from backends.trace import Tracer, span
from simulator.parameter_server import (
    SparseLRData,
    batch_rows,
    check_consistency,
    check_layout,
    idle_time_s,
    iteration_time_s,
    key_ranges,
    required_clock,
    straggler_delays,
    throughput,
)

APP_ID = 0


@dataclass(frozen=True)
class PSConfig:
    """One training run on the parameter server (times in s).

    Attributes:
        servers, workers: ``S`` and ``W`` (the run uses ``1 + S + W`` processes).
        model: ``sparse_lr`` or ``mlp``; ``features``/``nnz``/``zipf`` shape the sparse data,
            ``mlp_sizes`` the MLP.
        consistency: ``bsp``, ``ssp`` (bounded delay ``tau``) or ``async``.
        iterations, batch_size: global batch per iteration, split over the workers.
        optimizer, lr: the servers' update rule.
        splits: each server's first key (``None``: equal ranges).
        straggler_mean_s, slow_workers: seeded extra delay of the first ``slow_workers``.
        timeout_s: a wait that hears nothing this long fails, naming whom it waited for.
        trace: record spans (pull, compute, push, wait) for a timeline.
        fail: ``(role, index, iteration)`` — that node exits abruptly there (fault tests).
        fail_dir: where survivors write their error (fault tests).
    """

    servers: int = 1
    workers: int = 2
    model: str = "sparse_lr"
    consistency: str = "bsp"
    tau: int = 0
    iterations: int = 20
    batch_size: int = 64
    optimizer: str = "sgd"
    lr: float = 0.5
    features: int = 1000
    nnz: int = 16
    zipf: float = 0.0
    examples: int = 4096
    mlp_sizes: tuple[int, ...] = (32, 64, 10)
    seed: int = 0
    splits: tuple[int, ...] | None = None
    straggler_mean_s: float = 0.0
    slow_workers: int = 1
    timeout_s: float = 20.0
    trace: bool = False
    fail: tuple[str, int, int] | None = None
    fail_dir: str | None = None

    def validate(self) -> None:
        """Raise :class:`~simulator.parameter_server.PSConfigError` for a config that cannot
        work (before any process starts)."""
        check_layout(self.servers, self.workers)
        check_consistency(self.consistency, self.tau)
        key_ranges(self.num_keys(), self.servers, self.splits)
        if self.model not in ("sparse_lr", "mlp"):
            from simulator.parameter_server import PSConfigError

            raise PSConfigError(f"unknown model {self.model!r}; choose sparse_lr or mlp")
        if self.batch_size < self.workers:
            from simulator.parameter_server import PSConfigError

            raise PSConfigError(f"a batch of {self.batch_size} cannot feed {self.workers} "
                                "workers")

    def num_keys(self) -> int:
        if self.model == "mlp":
            from simulator.parameter_server import mlp_num_params

            return mlp_num_params(self.mlp_sizes)
        return self.features + 1

    def build_model(self) -> Model:
        if self.model == "mlp":
            return MLPModel(self.mlp_sizes, self.examples, self.seed)
        return SparseLRModel(SparseLRData(self.features, self.examples, self.nnz, self.seed,
                                          self.zipf))


WaitFn = Callable[[KVWorker, int, int], None]


def bounded_delay_wait(kv: KVWorker, iteration: int, tau: int) -> None:
    """SSP's wait before iteration ``t``: until every worker has pushed ``t − τ`` iterations."""
    need = required_clock("ssp", iteration, tau)
    if need is not None:
        kv.wait(kv.clock(need))


@dataclass
class WorkerLog:
    """What one worker recorded: per iteration start/end (s, perf_counter), loss, staleness,
    and the time it idled in its consistency model's wait (``wait_s``: BSP — for its push's
    answer; SSP — for the clock; :func:`simulator.parameter_server.idle_time_s`)."""

    worker: int
    start_s: list[float] = field(default_factory=list)
    end_s: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    staleness: list[int] = field(default_factory=list)
    wait_s: list[float] = field(default_factory=list)
    bytes_sent: int = 0


def worker_loop(po: Postoffice, kv: KVWorker, model: Model, cfg: PSConfig,
                wait_fn: WaitFn = bounded_delay_wait, tracer: Tracer | None = None
                ) -> WorkerLog:
    """One worker: wait (SSP), pull, compute, push — ``cfg.iterations`` times."""
    me, W = po.my_rank, cfg.workers
    delays = straggler_delays(cfg.seed, cfg.iterations, W, cfg.straggler_mean_s,
                              cfg.slow_workers)[:, me]
    log, pending = WorkerLog(me), []
    for t in range(cfg.iterations):
        if cfg.fail == ("worker", me, t):
            os._exit(3)
        log.start_s.append(time.perf_counter())
        waited = 0.0
        if cfg.consistency == "ssp":
            with span(tracer, "wait", f"clock {t - cfg.tau}"):
                waited = time.perf_counter()
                wait_fn(kv, t, cfg.tau)
                waited = time.perf_counter() - waited
        rows = batch_rows(t, cfg.batch_size, model.num_examples, me, W)
        keys = model.keys(rows)
        w = torch.empty(keys.numel())
        with span(tracer, "pull", f"pull {t}", 4 * keys.numel()):
            clock = kv.wait(kv.pull(keys, w))
        with span(tracer, "compute", f"grad {t}"):
            loss, grad = model.grad(w, keys, rows, cfg.batch_size)
            if delays[t] > 0:
                time.sleep(delays[t])
        with span(tracer, "push", f"push {t}", 4 * keys.numel()):
            ts = kv.push(keys, grad, clock=t)
            if cfg.consistency == "bsp":
                waited = time.perf_counter()
                kv.wait(ts)
                waited = time.perf_counter() - waited
            else:
                pending.append(ts)
        pending = [p for p in pending if not kv.customer.done(p) or kv.wait(p) is None]
        log.end_s.append(time.perf_counter())
        log.loss.append(loss)
        log.staleness.append(t - clock)
        log.wait_s.append(waited)
    for p in pending:
        kv.wait(p)
    log.bytes_sent = po.van.bytes_sent
    return log


def run_node(cfg: PSConfig, wait_fn: WaitFn = bounded_delay_wait) -> dict[str, Any]:
    """Rank function: play this rank's role in one training run; return what it recorded.

    Workers return their :class:`WorkerLog` (as a dict); worker 0 also the final weights
    (pulled after every worker finished); servers their bytes sent; every rank its spans.
    """
    torch.set_num_threads(1)
    po = Postoffice(cfg.servers, cfg.workers, cfg.num_keys(), cfg.splits, cfg.timeout_s)
    tracer = Tracer(enabled=cfg.trace)
    model = cfg.build_model()
    out: dict[str, Any] = {"role": "scheduler"}
    try:
        if po.is_server:
            begin, end = po.ranges[po.my_rank]
            store = KVStore(model.init()[begin:end].clone(), begin,
                            make_rule(cfg.optimizer, cfg.lr), cfg.consistency, cfg.workers,
                            po.worker_ids)
            server = KVServer(APP_ID, po, _traced(store, tracer, cfg))
            po.waiting_on = lambda: store.waiting_on(po.describe)
            del server
            out = {"role": "server"}
        kv = KVWorker(APP_ID, po) if po.is_worker else None
        po.start()
        if kv is not None:
            log = worker_loop(po, kv, model, cfg, wait_fn, tracer)
            out = {"role": "worker", "log": asdict(log)}
            po.barrier(4)  # every worker done: the weights are final
            if po.my_rank == 0:
                final = torch.empty(cfg.num_keys())
                kv.wait(kv.pull(torch.arange(cfg.num_keys()), final))
                out["weights"] = final.numpy()
        po.finalize()
    except Exception as exc:
        if cfg.fail_dir is not None:
            with open(os.path.join(cfg.fail_dir, f"rank{dist.get_rank()}.txt"), "w") as fh:
                fh.write(f"{type(exc).__name__}: {exc}")
        raise
    out["bytes_sent"] = po.van.bytes_sent
    out["spans"] = tracer.trace.to_records()
    return out


def run_scenarios(cfgs: list[PSConfig]) -> list[dict[str, Any]]:
    """Rank function: :func:`run_node` for each config in turn, in one launched group (each
    run builds its own postoffice and van group), so that tests start processes once."""
    return [run_node(cfg) for cfg in cfgs]


def _traced(store: KVStore, tracer: Tracer, cfg: PSConfig) -> Callable[..., None]:
    """The store as a request handle, each request a span; ``cfg.fail`` may kill a server."""
    handled = [0]

    def handle(msg: Any, server: KVServer) -> None:
        if cfg.fail is not None and cfg.fail[:2] == ("server", server.postoffice.my_rank) \
                and msg.meta.push and msg.meta.clock >= cfg.fail[2]:
            os._exit(3)
        handled[0] += 1
        with span(tracer if tracer.enabled else None, "handle",
                  "push" if msg.meta.push else "pull" if msg.meta.pull else "clock",
                  4 * msg.meta.nvals):
            store(msg, server)

    return handle


@dataclass
class PSResult:
    """A finished run: every worker's log, the final weights, the bytes, the spans."""

    config: PSConfig
    workers: list[dict[str, Any]]
    weights: torch.Tensor
    server_bytes: list[int]
    spans: list[dict[str, Any]]
    warmup: int = 2

    def _times(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([w["start_s"] for w in self.workers]).T,
                np.array([w["end_s"] for w in self.workers]).T)

    @property
    def time_per_iteration_s(self) -> float:
        """Median over workers and iterations (after ``warmup``) of one iteration's time, s
        (:func:`simulator.parameter_server.iteration_time_s`, as the simulated twin)."""
        return iteration_time_s(*self._times(), self.warmup)

    @property
    def throughput(self) -> float:
        """Examples per second, all workers together."""
        return throughput(*self._times(), self.config.batch_size, self.warmup)

    @property
    def idle_time_s(self) -> float:
        """Mean time per iteration a worker idled in its consistency model's wait, s (after
        ``warmup``; :func:`simulator.parameter_server.idle_time_s`, as the simulated twin)."""
        return idle_time_s(np.array([w["wait_s"] for w in self.workers]).T, self.warmup)

    @property
    def losses(self) -> list[float]:
        """Global mini-batch loss per iteration (the workers' shares summed)."""
        return [float(sum(x)) for x in zip(*(w["loss"] for w in self.workers), strict=True)]

    @property
    def max_staleness(self) -> int:
        return int(max(max(w["staleness"]) for w in self.workers))


def train(cfg: PSConfig, wait_fn: WaitFn = bounded_delay_wait, timeout: float = 60.0
          ) -> PSResult:
    """Run ``cfg`` on ``1 + S + W`` local processes; return the :class:`PSResult`."""
    from backends.launch import spawn

    cfg.validate()
    outs = spawn(run_node, 1 + cfg.servers + cfg.workers, cfg, wait_fn, backend="gloo",
                 timeout=timeout, deadline=timeout + cfg.iterations * 5)
    return collect(cfg, outs)


def collect(cfg: PSConfig, outs: list[dict[str, Any]]) -> PSResult:
    """A :class:`PSResult` from every rank's return value."""
    workers = [o["log"] for o in outs if o["role"] == "worker"]
    weights = torch.from_numpy(next(o["weights"] for o in outs if "weights" in o))
    return PSResult(cfg, workers, weights,
                    [o["bytes_sent"] for o in outs if o["role"] == "server"],
                    [s for o in outs for s in o["spans"]])


def sgd_reference(cfg: PSConfig) -> tuple[torch.Tensor, list[float]]:
    """Single-process mini-batch SGD on the same data and order, with ``torch.optim.SGD``."""
    model = cfg.build_model()
    w = torch.nn.Parameter(model.init())
    opt = torch.optim.SGD([w], lr=cfg.lr)
    losses = []
    for t in range(cfg.iterations):
        rows = batch_rows(t, cfg.batch_size, model.num_examples, 0, 1)
        opt.zero_grad()
        if isinstance(model, SparseLRModel):
            loss = model.reference_loss(w, rows)
        else:
            torch.nn.utils.vector_to_parameters(w, model.net.parameters())
            idx = torch.from_numpy(rows)
            loss = torch.nn.functional.cross_entropy(
                torch.func.functional_call(model.net, _params(model.net, w), (model.x[idx],)),
                model.y[idx])
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        losses.append(float(loss.detach()))
    return w.detach(), losses


def _params(net: torch.nn.Module, flat: torch.Tensor) -> dict[str, torch.Tensor]:
    """Views of ``flat`` shaped as ``net``'s parameters, by name (autograd flows to ``flat``)."""
    out, i = {}, 0
    for name, p in net.named_parameters():
        out[name] = flat[i:i + p.numel()].view_as(p)
        i += p.numel()
    return out
