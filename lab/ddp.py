"""DDP in the lab: one MLP, predicted by :mod:`simulator.ddp` and measured with both real DDPs.

* :func:`profile_layers` — the per-layer compute profile, measured on **one** process (a
  primitive: forward and backward of each ``Linear`` + ReLU alone, median of repeats, one
  thread), turned into a :class:`simulator.ddp.Workload`;
* :func:`predict` — the simulated step on this machine's calibrated local cluster
  (``cluster_from_entry``), with the host's cores shared by every rank's backward and
  communication threads (:class:`simulator.ddp.CoreShare`);
* :func:`measure_steps` — rank function: ``backends.ddp.DistributedDataParallel`` and
  ``torch.nn.parallel.DistributedDataParallel`` at each bucket cap, repeats interleaved
  (:func:`backends.measure.measure_many`), one training step per call;
* :func:`measured_timeline` — rank function: one traced step of ours (forward, backward,
  optimizer spans and, per bucket, ``ready`` and ``allreduce`` spans).

Nothing here is fitted to a DDP measurement: the prediction uses the profile (one process),
the calibration (ping-pong, exchanges, reduction, copy) and the core count only.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from simulator.core.calibration import CalibrationEntry
from simulator.core.engine import Trace
from simulator.core.hardware import Cluster
from simulator.ddp import DDPPrediction, Interference, Layer, MiB, Workload, predict_step
from simulator.host import cluster_from_entry

DEFAULT_WIDTHS = (1024,) * 10
"""The benchmark's MLP: nine 1024×1024 ``Linear`` layers, 36 MiB of float32 parameters."""
DEFAULT_BATCH = 32
SMOKE_WIDTHS = (256,) * 5
"""A small MLP (1 MiB) for smoke runs and the notebook's quick mode."""


def build_mlp(widths: Sequence[int], seed: int = 0) -> Any:
    """``Linear → ReLU → … → Linear`` with the given widths (float32, seeded;
    :func:`lab.models.mlp`)."""
    from torch import nn

    from lab.models import mlp

    return mlp(widths, seed, nn.ReLU)


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return sorted(samples)[len(samples) // 2]


def profile_layers(widths: Sequence[int], batch: int, repeats: int = 15) -> Workload:
    """Forward and backward time of every layer, measured alone on this one process, s.

    Each ``Linear(a, b)`` (+ ReLU) runs on a ``batch × a`` input; its backward computes the
    weight and bias gradients and, except for the first layer, the input's gradient — what
    autograd does for it inside the whole model. One thread (``torch.set_num_threads(1)``),
    as every rank runs.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        layers = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layer = torch.nn.Linear(a, b)
            x = torch.randn(batch, a, requires_grad=i > 0)
            act = torch.relu if i < len(widths) - 2 else (lambda t: t)
            fwd = _median_time(lambda: act(layer(x)), repeats)  # noqa: B023
            upstream = torch.randn(batch, b)

            def backward() -> None:
                out = act(layer(x))  # noqa: B023
                torch.autograd.backward(out, upstream)  # noqa: B023

            layer.zero_grad(set_to_none=True)
            total = _median_time(backward, repeats)
            layers.append(Layer(f"fc{i}", (a * b * 4, b * 4), fwd, max(total - fwd, 0.0)))
        return Workload(tuple(layers), batch)
    finally:
        torch.set_num_threads(threads)


COMM_SEGMENT_BYTES = 2**20
"""Message size of the CPU-share measurement: gloo's largest ring segment."""


def _post_exchanges(send: Any, recv: Any, count: int) -> list[Any]:
    """Post ``count`` exchanges with partner ``r xor 1`` at once (asynchronous, like DDP's
    bucket all-reduces); returns the works, completing in order."""
    import torch.distributed as dist

    peer = dist.get_rank() ^ 1
    if peer >= dist.get_world_size():
        return []
    works = []
    for _ in range(count):
        works += [dist.isend(send, peer), dist.irecv(recv, peer)]
    return works


def overlap_interference(count: int = 150, nbytes: int = COMM_SEGMENT_BYTES,
                         repeats: int = 3) -> tuple[float, float]:
    """Rank function: (compute speed, communication speed) while both run, each relative to
    running alone — every rank doing the same at once, as in a DDP step.

    Communication: ``count`` exchanges of ``nbytes`` with partner ``r xor 1``, posted at once
    as asynchronous operations (gloo's threads carry them, as they carry DDP's buckets).
    Compute: ``32 × 1024`` by ``1024 × 1024`` matmuls on the main thread, one layer's work.
    Overlapped: matmuls run until the exchanges complete. Medians over ``repeats``.
    """
    import torch
    import torch.distributed as dist

    x, w = torch.randn(32, 1024), torch.randn(1024, 1024)
    send, recv = torch.zeros(nbytes, dtype=torch.uint8), torch.empty(nbytes, dtype=torch.uint8)
    alone_comm, both_comm, mm_rate, both_mm = [], [], [], []
    for work in _post_exchanges(send, recv, 5):
        work.wait()
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        for work in _post_exchanges(send, recv, count):
            work.wait()
        alone_comm.append(time.perf_counter() - start)
        dist.barrier()
        start, done = time.perf_counter(), 0
        while time.perf_counter() - start < alone_comm[-1]:
            torch.mm(x, w)
            done += 1
        mm_rate.append(done / (time.perf_counter() - start))
        dist.barrier()
        start, done = time.perf_counter(), 0
        works = _post_exchanges(send, recv, count)
        finished = threading.Event()  # a gloo send/recv work reports completion only to wait()

        def wait_all(works: list[Any] = works, finished: threading.Event = finished) -> None:
            for work in works:
                work.wait()
            finished.set()

        waiter = threading.Thread(target=wait_all)
        waiter.start()
        while not finished.is_set():
            torch.mm(x, w)
            done += 1
        waiter.join()
        both_comm.append(time.perf_counter() - start)
        both_mm.append(done / both_comm[-1])
    med = statistics.median
    if dist.get_rank() ^ 1 >= dist.get_world_size() or min(alone_comm + both_comm) <= 0:
        return 1.0, 1.0  # no partner (odd world): it only computed, as it would alone
    return med(both_mm) / med(mm_rate), med(alone_comm) / med(both_comm)


def interference(world: int) -> Interference:
    """:func:`overlap_interference` on ``world`` ranks at once, medians over the ranks."""
    from backends.launch import spawn

    rates = spawn(overlap_interference, world)
    return Interference(statistics.median(r[0] for r in rates),
                        statistics.median(r[1] for r in rates))


def gloo_ring_cluster(entry: CalibrationEntry, world: int) -> Cluster:
    """The calibrated local cluster as gloo's ring all-reduce of MiB-sized buckets sees it.

    In a ring every rank sends at once, so no segment travels alone: each pays the latency
    of the calibration's *concurrent exchanges* (``bus_latency_s``, the intercept of their
    fit), the first of a step too, not the idle ping-pong's α (at 2 ranks a step of the ring
    *is* that exchange: 1 MiB calibrated at 0.69 ms, 0.55 with α for the first message).
    The chain of dependent 4 KiB messages (``chain_latency_s``: up to 1.8 ms a step at 4
    ranks on 2 cores — a wait for a time slice) is left out: gloo's busy threads streaming
    megabytes do not pay it per segment (24 MiB at 4 ranks measured alone 36–38 ms; the
    chain latency would predict 49–58 ms). Shared by :func:`predict` and
    :func:`lab.horovod.costs`."""
    return cluster_from_entry(
        replace(entry, latency_s=max(entry.latency_s, entry.bus_latency_s), chain_latency_s=[]),
        world_size=world)


def predict(entry: CalibrationEntry, workload: Workload, world: int,
            bucket_cap_mb: float | None, overlap: bool = True,
            contention: Interference | None = None) -> DDPPrediction:
    """The simulated step on the calibrated local cluster (as the buckets' all-reduces see it:
    :func:`gloo_ring_cluster`), ranks sharing ``entry.cores``;
    ``contention`` is :func:`interference` at this world size (``None``: processor
    sharing)."""
    from simulator.ddp import bucket_caps

    cap, first = bucket_caps(bucket_cap_mb)
    cluster = gloo_ring_cluster(entry, world)
    return predict_step(cluster, workload, cap, first, overlap, cores=float(entry.cores),
                        interference=contention)


# ---- the real side (rank functions, run under backends.launch.spawn) -------------------------

def _step(model: Any, opt: Any, x: Any, y: Any) -> Callable[[], None]:
    import torch

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()  # type: ignore[no-untyped-call]
        opt.step()

    return step


def _models(widths: Sequence[int], caps: Sequence[float | None], batch: int,
            which: Sequence[str]) -> list[tuple[str, float | None, Callable[[], None]]]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as TorchDDP

    from backends.ddp import DistributedDataParallel

    gen = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(batch, widths[0], generator=gen)
    y = torch.randn(batch, widths[-1], generator=gen)
    steps = []
    for cap in caps:
        for name in which:
            net = build_mlp(widths)
            ddp = (TorchDDP(net, bucket_cap_mb=cap) if name == "pytorch" else
                   DistributedDataParallel(net, bucket_cap_mb=cap, overlap=name == "ours"))
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
            steps.append((name, cap, _step(ddp, opt, x, y)))
    return steps


def measure_steps(widths: Sequence[int], batch: int, caps: Sequence[float | None],
                  repeats: int = 10, which: Sequence[str] = ("ours", "pytorch", "ours-serial")
                  ) -> list[dict[str, Any]]:
    """Rank function: step time of each DDP at each bucket cap, repeats interleaved
    (``ours-serial``: ours with ``overlap=False``)."""
    from backends.measure import measure_many

    steps = _models(widths, caps, batch, which)
    timings = measure_many([fn for _, _, fn in steps], repeats=repeats, warmup=3, inner=1)
    return [{"ddp": name, "bucket_cap_mb": cap, **t.as_dict()}
            for (name, cap, _), t in zip(steps, timings, strict=True)]


def measured_timeline(widths: Sequence[int], batch: int, bucket_cap_mb: float | None,
                      steps: int = 3) -> list[dict[str, Any]]:
    """Rank function: the spans of the last of ``steps`` traced steps of our DDP, every rank."""
    import torch
    import torch.distributed as dist

    from backends.ddp import DistributedDataParallel
    from backends.trace import Tracer

    tracer = Tracer()
    model = DistributedDataParallel(build_mlp(widths), bucket_cap_mb=bucket_cap_mb,
                                    tracer=tracer)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(dist.get_rank())
    x, y = torch.randn(batch, widths[0], generator=gen), torch.randn(batch, widths[-1])
    for _ in range(steps):
        dist.barrier()
        tracer.trace.spans.clear()
        opt.zero_grad()
        with tracer.span("compute", "forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with tracer.span("compute", "backward + wait"):
            loss.backward()  # type: ignore[no-untyped-call]
        with tracer.span("compute", "optimizer"):
            opt.step()
    return tracer.gather().to_records()


def timeline(world: int, widths: Sequence[int], batch: int,
             bucket_cap_mb: float | None) -> Trace:
    """One measured step of our DDP on ``world`` ranks, shifted to start at 0."""
    from backends.launch import spawn

    records = spawn(measured_timeline, world, list(widths), batch, bucket_cap_mb)[0]
    return Trace.from_records(records).shifted()


@dataclass(frozen=True)
class Point:
    """One bucket cap at one world size: prediction beside both measured DDPs (s)."""

    world: int
    bucket_cap_mb: float
    buckets: int
    predicted_s: float
    predicted_no_overlap_s: float
    exposed_comm_s: float
    ours_median_s: float
    ours_p10_s: float
    ours_p90_s: float
    pytorch_median_s: float
    pytorch_p10_s: float
    pytorch_p90_s: float
    ours_no_overlap_median_s: float

    @property
    def ours_error(self) -> float:
        """(predicted − ours measured) / ours measured."""
        return (self.predicted_s - self.ours_median_s) / self.ours_median_s

    @property
    def pytorch_error(self) -> float:
        """(predicted − PyTorch measured) / PyTorch measured."""
        return (self.predicted_s - self.pytorch_median_s) / self.pytorch_median_s

    @property
    def ratio(self) -> float:
        """Our step time over PyTorch's, measured side by side."""
        return self.ours_median_s / self.pytorch_median_s


def sweep(entry: CalibrationEntry, workload: Workload, widths: Sequence[int], world: int,
          caps: Sequence[float], repeats: int = 10,
          contention: Interference | None = None) -> list[Point]:
    """Predict and measure every cap at one world size (one launch); ``contention`` is
    :func:`interference` at this world size."""
    from backends.launch import spawn

    rows = spawn(measure_steps, world, list(widths), workload.batch, list(caps), repeats,
                 timeout=120)[0]
    by = {(r["ddp"], r["bucket_cap_mb"]): r for r in rows}
    points = []
    for cap in caps:
        on, off = (predict(entry, workload, world, cap, overlap, contention)
                   for overlap in (True, False))
        ours, theirs, serial = by[("ours", cap)], by[("pytorch", cap)], by[("ours-serial", cap)]
        points.append(Point(world, cap, len(on.buckets), on.step_s, off.step_s,
                            on.exposed_comm_s, ours["median_s"], ours["p10_s"], ours["p90_s"],
                            theirs["median_s"], theirs["p10_s"], theirs["p90_s"],
                            serial["median_s"]))
    return points


def caps_mb(workload: Workload) -> list[float]:
    """A bucket-cap sweep for ``workload``: from one layer per bucket to one bucket, MiB."""
    layer = max(sum(layer.param_bytes) for layer in workload.layers) / MiB
    total = workload.param_bytes / MiB
    caps, cap = [], layer / 2
    while cap < 2 * total:
        caps.append(round(cap, 3))
        cap *= 2.5
    return caps


# ---- pictures and demonstrations for notebook 05 -----------------------------------------------

LANE_COLOURS = {"compute": "tab:green", "allreduce": "tab:red", "ready": "black",
                "wait": "tab:gray"}


def plot_step(traces: Sequence[tuple[str, Trace]], path: str | None = None) -> Any:
    """One step per panel, two lanes per rank — compute above, communication below — so the
    overlap of all-reduces with backward is visible; a tick marks each bucket becoming ready."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(traces), 1, figsize=(9, 1.0 + 1.3 * len(traces) * 2),
                             squeeze=False)
    end = max((s.end for _, t in traces for s in t), default=0.0)
    unit, scale = ("ms", 1e-3) if end < 5 else ("s", 1.0)
    for ax, (title, raw) in zip(axes[:, 0], traces, strict=True):
        trace = raw.shifted()
        ranks = sorted({s.rank for s in trace})
        for row, rank in enumerate(ranks):
            for s in trace.for_rank(rank):
                lane = 2 * row + (1 if s.kind == "allreduce" else 0)
                if s.kind == "ready":
                    ax.plot([s.end / scale] * 2, [lane + 0.35, lane - 0.35], color="black",
                            lw=1.5)
                    continue
                ax.barh(lane, max(s.duration, 1e-9) / scale, left=s.start / scale, height=0.6,
                        color=LANE_COLOURS.get(s.kind, "tab:cyan"), edgecolor="black",
                        linewidth=0.3)
                if s.kind == "allreduce":
                    ax.text((s.start + s.duration / 2) / scale, lane,
                            s.name.split()[-1], ha="center", va="center", fontsize=7)
        ax.set_yticks(range(2 * len(ranks)))
        ax.set_yticklabels([f"rank {r} {lane}" for r in ranks for lane in ("compute", "comm")])
        ax.invert_yaxis()
        ax.set_title(title)
        ax.set_xlabel(f"time ({unit})")
        ax.set_xlim(0, end / scale * 1.02)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig


def train_uneven(batches_per_rank: Sequence[int], use_join: bool) -> dict[str, Any]:
    """Rank function: train our DDP on ``batches_per_rank[rank]`` batches, with or without
    :class:`backends.ddp_join.Join`; returns the steps taken, the time and the parameters'
    checksum (equal on every rank when training ended well)."""
    import torch
    import torch.distributed as dist

    from backends.ddp import DistributedDataParallel
    from backends.ddp_join import Join

    model = DistributedDataParallel(build_mlp((32, 64, 8)), bucket_cap_mb=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rank = dist.get_rank()
    start, steps = time.perf_counter(), 0

    def loop() -> None:
        nonlocal steps
        for _ in range(batches_per_rank[rank]):
            opt.zero_grad()
            model(torch.randn(16, 32)).square().mean().backward()
            opt.step()
            steps += 1

    if use_join:
        with Join([model]):
            loop()
    else:
        loop()
        dist.barrier()  # the others are still in a backward's all-reduce: this never matches
    checksum = float(sum(p.double().sum() for p in model.parameters()))
    return {"rank": rank, "steps": steps, "seconds": time.perf_counter() - start,
            "checksum": checksum}
