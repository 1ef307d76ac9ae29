"""ParameterServerStrategy's workload: a small model trained by closures, timed (ch. 19).

What TF's tutorial on ``ParameterServerStrategy`` does with Keras, here with a model one can
read whole: a **bag-of-embeddings logistic regression**. An example is :data:`BAG` word ids;
its feature is the mean of their rows of an embedding table (``VOCAB × DIM``, a
:class:`~backends.tf_distribute.ps_strategy.ShardedVariable` of :data:`EMBED_SHARDS` row blocks
over the ps tasks); a dense ``DIM × 1`` weight gives the logit; labels come from a fixed random
teacher. One closure (:func:`train_step`) is one SGD step on one batch:

    pull   the batch's distinct rows from their shards, the dense weight
    math   forward, binary cross-entropy, backward (:func:`step_math`, autograd)
    push   −lr·grad into those rows (``scatter_add``) and into the dense weight
    ledger +1 in the closure's own row of a completion ledger (every row 1 at the end
           proves that each closure ran to completion exactly once)

Workers update asynchronously, as TF's do: a closure's pull may be older than another's push.

:func:`measure_closures` is the real twin's timing — ``K`` closures on ``W`` workers, from the
first ``schedule`` to ``join`` (s) — and :func:`profile_compute`, :func:`profile_channel` the
primitives its simulated twin is predicted from (the math on one process; a round trip to a
ps task, alone and with every worker echoing at once, :func:`profile_busy_latency`; a ps
task's own work per request, :func:`profile_service`). Times are seconds, sizes bytes.
"""

from __future__ import annotations

import pickle
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from backends.tf_distribute.coordinator import ClusterCoordinator
from backends.tf_distribute.ps_channel import dumps, request, task_name
from backends.tf_distribute.ps_strategy import (
    Cluster,
    LocalCluster,
    MinSizePartitioner,
    ParameterServer,
    ParameterServerStrategy,
    ShardedVariable,
)

VOCAB, DIM, BAG, BATCH = 128, 16, 4, 32
"""Embedding rows, their width, ids per example, examples per batch."""

EMBED_SHARDS = 2
"""Row blocks of the embedding table: :func:`strategy_for`'s :class:`MinSizePartitioner`
keeps every shard at least ``VOCAB·DIM·4 / EMBED_SHARDS`` bytes, so the table gets this many
and the small dense weight and ledger one each."""

LR = 5.0
"""SGD learning rate."""

WARMUP = 3
"""Untimed first rounds of each profile (first calls load code and allocate)."""


def make_batch(index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch ``index``: ids ``(BATCH, BAG)`` and labels ``(BATCH,)``, the same every time."""
    gen = torch.Generator().manual_seed(1000 + index)
    ids = torch.randint(VOCAB, (BATCH, BAG), generator=gen)
    teacher = torch.randn(VOCAB, generator=torch.Generator().manual_seed(0))
    return ids, (teacher[ids].mean(1) > 0).float()


def step_math(rows: torch.Tensor, dense: torch.Tensor, inverse: torch.Tensor,
              labels: torch.Tensor) -> tuple[float, torch.Tensor, torch.Tensor]:
    """Loss and the gradients of the pulled ``rows`` and ``dense`` weight (``inverse`` maps
    each id of the batch to its row in ``rows``)."""
    rows, dense = rows.clone().requires_grad_(), dense.clone().requires_grad_()
    logits = (rows[inverse].mean(1) @ dense).squeeze(1)
    loss = F.binary_cross_entropy_with_logits(logits, labels)
    loss.backward()  # type: ignore[no-untyped-call]
    assert rows.grad is not None and dense.grad is not None
    return float(loss.detach()), rows.grad, dense.grad


def train_step(emb: ShardedVariable, dense: ShardedVariable, ledger: ShardedVariable,
               batch: int, slot: int) -> float:
    """One closure: pull, one SGD step on batch ``batch``, push, add 1 to row ``slot`` of the
    ledger; the loss."""
    ids, labels = make_batch(batch)
    uniq, inverse = ids.unique(return_inverse=True)  # type: ignore[no-untyped-call]
    loss, g_rows, g_dense = step_math(emb.lookup(uniq), dense.read_value(), inverse, labels)
    emb.scatter_add(uniq, -LR * g_rows)
    dense.assign_add(-LR * g_dense)
    ledger.scatter_add(torch.tensor([slot]), torch.ones(1, 1))
    return loss


def evaluate(emb: torch.Tensor, dense: torch.Tensor, batches: range = range(-8, 0)) -> float:
    """Mean loss of the model ``(emb, dense)`` on held-out ``batches``."""
    losses = []
    for b in batches:
        ids, labels = make_batch(b)
        uniq, inverse = ids.unique(return_inverse=True)  # type: ignore[no-untyped-call]
        losses.append(step_math(emb[uniq], dense, inverse, labels)[0])
    return statistics.fmean(losses)


def placement(var: ShardedVariable) -> Sequence[tuple[int, int, int]]:
    """``(ps task, first row, end row)`` of each shard of ``var``: where its rows live."""
    return [(s.ps, s.begin, s.end) for s in var.shards]


@dataclass
class Model:
    """The model's variables on the ps tasks, and the ledger for ``closures`` closures."""

    emb: ShardedVariable
    dense: ShardedVariable
    ledger: ShardedVariable


def create_model(strategy: ParameterServerStrategy, closures: int, tag: str = "") -> Model:
    """Variables of a fresh model (seeded) and a ledger of ``closures`` zero rows."""
    gen = torch.Generator().manual_seed(1)
    return Model(strategy.create_variable(f"emb{tag}", 0.3 * torch.randn(VOCAB, DIM,
                                                                          generator=gen)),
                 strategy.create_variable(f"dense{tag}", 0.3 * torch.randn(DIM, 1,
                                                                           generator=gen)),
                 strategy.create_variable(f"ledger{tag}", torch.zeros(closures, 1)))


def strategy_for(cluster: Cluster) -> ParameterServerStrategy:
    """The workload's strategy: the embedding table in :data:`EMBED_SHARDS` shards, the rest
    whole. A model's four shards go round-robin over the ps tasks — table, table, dense,
    ledger — so with 1, 2 or 4 ps tasks every model is placed alike."""
    min_bytes = 4 * VOCAB * DIM // EMBED_SHARDS
    return ParameterServerStrategy(cluster, MinSizePartitioner(min_bytes, EMBED_SHARDS))


def run_closures(coordinator: ClusterCoordinator, model: Model, first: int, count: int
                 ) -> list[float]:
    """Schedule ``count`` training closures on batches ``first …`` (ledger rows ``0 …``) and
    join; their losses."""
    values = [coordinator.schedule(train_step, (model.emb, model.dense, model.ledger,
                                                first + k, k))
              for k in range(count)]
    coordinator.join(timeout_s=60)
    return coordinator.fetch(values)


def measure_closures(workers: int, closures: int, repeats: int, num_ps: int = 1
                     ) -> dict[str, Any]:
    """``repeats`` timings (s) of ``closures`` training closures on ``workers`` workers and
    ``num_ps`` ps tasks (:func:`time_closures`). The tasks are processes of this host
    (:class:`LocalCluster`) — or, on ranks torchrun started (:func:`backends.torchrun.attach`),
    those ranks, over their machines (:func:`backends.tf_distribute.ps_ranks.run_on_ranks`):
    the result then also says where each task ran (``tasks``)."""
    from backends.torchrun import attached

    if attached():
        from backends.tf_distribute.ps_ranks import run_on_ranks

        value, tasks = run_on_ranks(workers, num_ps, time_closures, closures, repeats)
        return {**value, "tasks": tasks}
    with LocalCluster(workers, num_ps) as cluster:
        return time_closures(cluster, closures, repeats)


def time_closures(cluster: Cluster, closures: int, repeats: int) -> dict[str, Any]:
    """``repeats`` timings (s) of ``closures`` training closures on ``cluster``, after one
    warm-up round (each worker's first closure opens its connections); also how many closures
    each worker ran and the ledger's check."""
    times, per_worker = [], [0] * len(cluster.workers)
    strategy = strategy_for(cluster)
    with ClusterCoordinator(strategy) as coordinator:
        warm = 2 * len(cluster.workers)
        run_closures(coordinator, create_model(strategy, warm, "_warm"), 0, warm)
        for r in range(repeats):
            model = create_model(strategy, closures, f"_{r}")
            start_closure = len(coordinator.closures)
            start = time.perf_counter()
            run_closures(coordinator, model, 0, closures)
            times.append(time.perf_counter() - start)
            for c in coordinator.closures[start_closure:]:
                per_worker[c.attempts[-1]] += 1
            ledger = model.ledger.read_value()
            if not bool((ledger == 1).all()):
                raise RuntimeError(f"ledger of repeat {r} is not all ones: {ledger}")
    return {"times_s": times, "closures_per_worker": per_worker}


def profile_compute(repeats: int = 50) -> float:
    """A closure's own work in this process (run it in a worker task: one torch thread), s of
    CPU time (the least of ``repeats``, as ``timeit`` advises for CPU work; waiting for a core
    is the model's to add): batch, unique ids, forward, loss, backward, the update tensors —
    all but the requests."""
    emb, dense = 0.3 * torch.randn(VOCAB, DIM), 0.3 * torch.randn(DIM, 1)
    samples = []
    for b in range(WARMUP + repeats):
        start = time.thread_time()
        ids, labels = make_batch(b)
        uniq, inverse = ids.unique(return_inverse=True)  # type: ignore[no-untyped-call]
        _, g_rows, g_dense = step_math(emb[uniq], dense, inverse, labels)
        _ = (-LR * g_rows, -LR * g_dense)
        samples.append(time.thread_time() - start)
    return min(samples[WARMUP:])


def profile_channel(sizes: tuple[int, int] = (8, 65536), repeats: int = 30
                    ) -> dict[str, float]:
    """The primitives on a cluster of one worker and one ps task: a ps task's round trip from
    this process fitted as ``2(α + n/B)`` for an echo of ``n`` bytes each way, from echoes of
    two sizes (float32 counts ``sizes``, medians) — ``latency_s`` α and ``bandwidth_Bps`` B —
    and, run as closures on the worker (one torch thread, as in a run),
    :func:`profile_compute` (``compute_s``) and :func:`profile_service` (``service_s``)."""
    medians = []
    with LocalCluster(1, 1) as cluster, \
            ClusterCoordinator(ParameterServerStrategy(cluster)) as coordinator:
        compute = coordinator.schedule(profile_compute, (repeats,))
        service = coordinator.schedule(profile_service, (repeats,))
        coordinator.join(timeout_s=60)
        address, name = cluster.ps[0].address, task_name("ps", 0)
        for n in sizes:
            payload, samples = torch.zeros(n), []
            for _ in range(WARMUP + repeats):
                start = time.perf_counter()
                request(name, address, cluster.authkey, ("echo", "", payload))
                samples.append(time.perf_counter() - start)
            medians.append(statistics.median(samples[WARMUP:]))
        measured = {"compute_s": compute.fetch(), "service_s": service.fetch()}
    (n0, n1), (t0, t1) = (4 * sizes[0], 4 * sizes[1]), medians
    per_byte = max((t1 - t0) / (2 * (n1 - n0)), 1e-12)
    return {"latency_s": max(t0 / 2 - n0 * per_byte, 0.0), "bandwidth_Bps": 1.0 / per_byte,
            **measured}


def echo_for(task: str, address: tuple[str, int], authkey: bytes, duration_s: float) -> float:
    """A closure: echo 8 bytes off ps task ``task`` at ``address`` for ``duration_s`` seconds;
    the median round trip, s."""
    payload, samples = torch.zeros(2), []
    end = time.perf_counter() + duration_s
    while (start := time.perf_counter()) < end:
        request(task, address, authkey, ("echo", "", payload))
        samples.append(time.perf_counter() - start)
    return statistics.median(samples[WARMUP:] or samples)


def profile_busy_latency(workers: int, num_ps: int, duration_s: float = 0.3) -> float:
    """α while every worker task echoes at once, each off its own ps task (round-robin), s:
    half the median round trip, over the workers. With more processes than cores, a message
    waits for its receiver to be scheduled; the lone echo of :func:`profile_channel` does
    not. A primitive of the channel, as the calibration's concurrent exchanges are of gloo's."""
    with LocalCluster(workers, num_ps) as cluster, \
            ClusterCoordinator(ParameterServerStrategy(cluster)) as coordinator:
        values = [coordinator.schedule(echo_for, (task_name("ps", w % num_ps),
                                                  cluster.ps[w % num_ps].address,
                                                  cluster.authkey, duration_s))
                  for w in range(workers)]
        coordinator.join(timeout_s=30)
        return float(statistics.median(coordinator.fetch(values))) / 2


def profile_service(repeats: int = 50) -> float:
    """A ps task's own work per request of :func:`train_step`, on this process, s of CPU time
    (the mean over the closure's requests, the least of ``repeats``): unpickle the request,
    serve it (:meth:`~backends.tf_distribute.ps_strategy.ParameterServer.handle`), pickle the
    answer."""
    ps = ParameterServer()
    ps.handle(("create", "emb", torch.zeros(VOCAB // EMBED_SHARDS, DIM)))
    ps.handle(("create", "dense", torch.zeros(DIM, 1)))
    rows = torch.arange(min(VOCAB // EMBED_SHARDS, BATCH * BAG // EMBED_SHARDS))
    samples = []
    for k in range(WARMUP + repeats):
        requests = [("gather", "emb", rows), ("read", "dense"),
                    ("scatter_add", "emb", rows, torch.ones(len(rows), DIM), (k, 1)),
                    ("add", "dense", torch.ones(DIM, 1), (k, 2))]
        start = time.thread_time()
        for message in requests:
            answer = ps.handle(pickle.loads(dumps(message)))
            dumps(("ok", answer))
        samples.append((time.thread_time() - start) / len(requests))
    return min(samples[WARMUP:])


def closure_messages(num_ps: int) -> dict[str, Any]:
    """The messages of one :func:`train_step` in bytes, from the model's shapes and where
    :func:`strategy_for` places its shards: ``dispatch`` (the closure and its arguments),
    ``pulls`` and ``pushes`` as ``(ps task, bytes sent, bytes answered)`` per request."""
    rows = min(VOCAB, BATCH * BAG) / EMBED_SHARDS  # distinct rows per shard, about
    emb_ps = [s % num_ps for s in range(EMBED_SHARDS)]
    dense_ps, ledger_ps = EMBED_SHARDS % num_ps, (EMBED_SHARDS + 1) % num_ps
    row_bytes = 4 * DIM
    pulls = [(p, int(8 * rows), int(rows * row_bytes)) for p in emb_ps]
    pulls.append((dense_ps, 0, 4 * DIM))
    pushes = [(p, int(8 * rows + rows * row_bytes), 0) for p in emb_ps]
    pushes += [(dense_ps, 4 * DIM, 0), (ledger_ps, 12, 0)]
    handle = ShardedVariable("emb", VOCAB, DIM, (), (("127.0.0.1", 1),) * num_ps, b"k" * 16)
    dispatch = len(dumps(("run", 0, train_step, (handle,) * 3 + (0, 0), {})))
    return {"dispatch": dispatch, "pulls": pulls, "pushes": pushes}


__all__ = ["BAG", "BATCH", "DIM", "EMBED_SHARDS", "LR", "VOCAB", "Model", "closure_messages",
           "create_model", "echo_for", "evaluate", "make_batch", "measure_closures",
           "placement", "profile_busy_latency", "profile_channel", "profile_compute",
           "profile_service", "run_closures", "step_math", "strategy_for", "time_closures",
           "train_step"]
