"""Tensor parallelism on this machine: the small GPT's step predicted and measured (ch. 12).

* **profile** (:func:`profile_ops`) — ONE process runs a rank's training step of a ``t × d``
  grid with every collective replaced by a local stand-in
  (:class:`backends.tensor_parallel.ProfileGroup`): the median seconds of compute between
  consecutive collectives, and each collective's kind, group and bytes — a compute profile
  (a primitive), in the order the rank runs it;
* **predict** (:func:`predict`) — the simulator replays those ops on every rank of this
  machine's calibrated cluster (``Cluster.local``): compute on a
  :class:`~simulator.pipeline.cores.CorePool` of the host's cores (ranks are processes that
  time-share them), the all-reduces as gloo runs them
  (:func:`simulator.ddp.gloo_ring_all_reduce`), the all-gathers as rings
  (:func:`simulator.collectives.all_gather.ring_all_gather`), the reduce-scatters as the
  lab's ring (:func:`simulator.collectives.reduce_scatter.ring_reduce_scatter`), each on its
  tensor or data group — the structure of :mod:`simulator.tensor_parallel`'s iteration
  (compute and tensor-group collectives per layer, then the data-parallel gradient
  all-reduce, then the optimizer), with measured compute instead of FLOPs at a GPU's peak;
* **measure** (:func:`measure_rank`) — the real step of
  :class:`backends.tensor_parallel.ParallelGPT` on spawned processes, barrier-aligned
  repeats, the slowest rank's time (:func:`backends.measure.measure_many`).

Nothing here is fitted to the measured steps.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from backends import tensor_parallel as tp
from simulator.collectives.all_gather import ring_all_gather
from simulator.collectives.reduce_scatter import ring_reduce_scatter
from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.core.hardware import Cluster
from simulator.ddp import gloo_ring_all_reduce
from simulator.pipeline.cores import CorePool

Op = tuple[str, str, float]
"""``("compute", "", seconds)`` or ``(kind, group, bytes)`` with kind ``all_reduce``,
``all_gather`` or ``reduce_scatter`` and group ``tensor`` or ``data``."""


@dataclass(frozen=True)
class GridPoint:
    """One configuration: ``t × d`` ranks (``p = 1``), sequence parallelism or not, the
    global batch (sequences per step, split over the ``d`` replicas)."""

    t: int
    d: int
    sequence_parallel: bool = False
    global_batch: int = 8
    layers: int = 2
    hidden: int = 32
    heads: int = 4
    vocab: int = 64
    seq: int = 16

    @property
    def world(self) -> int:
        return self.t * self.d

    @property
    def config(self) -> tp.GPTConfig:
        return tp.GPTConfig(self.layers, self.hidden, self.heads, self.vocab, self.seq)

    @property
    def name(self) -> str:
        return f"t{self.t}d{self.d}{'-sp' if self.sequence_parallel else ''}"


def _model(point: GridPoint, tensor: Any) -> tuple[tp.ParallelGPT, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = tp.ParallelGPT(point.config, tensor, point.sequence_parallel)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def _batch(point: GridPoint, dp_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, targets = tp.lm_batch(point.config, point.global_batch, seed=1)
    return (tp.batch_shard(tokens, point.d, dp_rank), tp.batch_shard(targets, point.d, dp_rank))


def profile_ops(point: GridPoint, repeats: int = 30, warmup: int = 5) -> list[Op]:
    """One rank's step on ONE process (collectives stood in): median compute seconds
    between collectives, and the collectives (see the module docstring)."""
    log: list[tuple[Any, ...]] = []
    tensor = tp.ProfileGroup(point.t, 0, "tensor", log)
    data = tp.ProfileGroup(point.d, 0, "data", log)
    model, opt = _model(point, tensor)
    tokens, targets = _batch(point, 0)
    runs: list[list[Op]] = []
    for i in range(warmup + repeats):
        log.clear()
        start = time.perf_counter()
        tp.train_step(model, opt, tokens, targets, data)
        end = time.perf_counter()
        ops: list[Op] = []
        last = start
        for kind, group, nbytes, entered, left in log:
            ops.append(("compute", "", entered - last))
            ops.append((kind, group, float(nbytes)))
            last = left
        ops.append(("compute", "", end - last))
        if i >= warmup:
            runs.append(ops)
    shape = [(k, g, b) if k != "compute" else (k, g, 0.0) for k, g, b in runs[0]]
    for run in runs:
        if [(k, g, b) if k != "compute" else (k, g, 0.0) for k, g, b in run] != shape:
            raise RuntimeError("the step's collectives changed between repeats")
    return [(k, g, statistics.median(r[j][2] for r in runs)) if k == "compute" else (k, g, b)
            for j, (k, g, b) in enumerate(runs[0])]


_PROGRAMS = {"all_gather": ring_all_gather, "reduce_scatter": ring_reduce_scatter}


def _rank_program(comm: SimComm, ops: Sequence[Op], point: GridPoint,
                  shared: dict[str, Any]) -> SimGen:
    """Replay ``ops`` on this rank: compute on the shared cores, collectives on the groups."""
    pool: CorePool | None = None
    if not math.isinf(shared["cores"]):
        pool = shared.setdefault("pool", CorePool(comm.env, shared["cores"]))
    grid = tp.megatron_groups(point.world, point.t)
    groups = {"tensor": comm.new_group(grid.of("tensor", comm.rank)),
              "data": comm.new_group(grid.of("data", comm.rank))}
    busy = 0.0
    for kind, group, value in ops:
        if kind == "compute":
            start = comm.now
            if pool is None:
                yield comm.env.timeout(value)
            else:
                yield from pool.run(value)
            comm.span("compute", "compute", start)
            busy += value
            continue
        sub = groups[group]
        assert sub is not None
        if kind == "all_reduce":
            yield from gloo_ring_all_reduce(sub, int(value), 4)
        else:
            yield from _PROGRAMS[kind](sub, int(value), 4)
    return busy


def predict(point: GridPoint, ops: Sequence[Op], cluster: Cluster,
            cores: float = math.inf) -> float:
    """Predicted step time on ``cluster`` (``t·d`` ranks), ranks sharing ``cores``, s."""
    if cluster.world_size != point.world:
        raise ValueError(f"the cluster has {cluster.world_size} ranks, the grid {point.world}")
    return run_spmd(cluster, _rank_program, ops, point, {"cores": cores},
                    trace=False).makespan_s


def compute_seconds(ops: Sequence[Op]) -> float:
    """One rank's compute in a step (the profile's sum), s."""
    return math.fsum(v for k, _, v in ops if k == "compute")


# ---- the real side (rank functions) ---------------------------------------------------------

WAIT_BYTES = 4096
"""Size of the messages of the waiting primitive (:func:`ring_steps`): half of an 8 KB
all-reduce, what one step of a 2-rank gloo ring moves."""
WAIT_COUNT = 16
"""Ring steps per timed call of the waiting primitive."""
FRAGMENT_MATMULS = 10
"""The compute between two ring steps of the primitive: this many 64 × 64 float32 matrix
products (~70 µs here, the size of the gaps between the small GPT's collectives)."""


def _fragment() -> Any:
    a = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))

    def run() -> None:
        for _ in range(FRAGMENT_MATMULS):
            a @ a

    return run


def ring_steps(nbytes: int = WAIT_BYTES, count: int = WAIT_COUNT, group: Any = None,
               compute: bool = True) -> Any:
    """The waiting primitive: a function that runs ``count`` ring steps — every rank sends
    ``nbytes`` to its left neighbour without waiting and blocks until as many arrive from its
    right (one step of gloo's ring, :func:`simulator.ddp.gloo_ring_all_reduce`) — each
    followed by a fragment of compute (:data:`FRAGMENT_MATMULS`) when ``compute``; the sends
    are waited for at the end. :func:`fragments` is the same compute without the steps.

    Timed with every rank at once, ``(steps − fragments) / count`` (means) is what one
    blocking wait for a tiny message costs *inside a chain of computation* on this host
    (see :func:`waiting_cluster`)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    ranks = [dist.get_global_rank(group, r) for r in range(world)] if group is not None \
        else list(range(world))
    left, right = ranks[(rank - 1) % world], ranks[(rank + 1) % world]
    out = torch.zeros(nbytes // 4)
    into = [torch.zeros(nbytes // 4) for _ in range(count)]
    fragment = _fragment()

    def run() -> None:
        sends = []
        for i in range(count):
            if world > 1:
                recv = dist.irecv(into[i], right, group=group, tag=i)
                sends.append(dist.isend(out, left, group=group, tag=i))
                assert recv is not None
                recv.wait()
            if compute:
                fragment()
        for send in sends:
            assert send is not None
            send.wait()

    return run


def fragments(count: int = WAIT_COUNT) -> Any:
    """``count`` compute fragments of :func:`ring_steps`, no messages."""
    fragment = _fragment()
    return lambda: [fragment() for _ in range(count)]


def waiting_cluster(world: int, exchange_s: float, nbytes: int = WAIT_BYTES,
                    calibration: str | None = None) -> tuple[Cluster, str]:
    """This machine's calibrated cluster (``Cluster.local``) with the latency of a message
    taken from the waiting primitive: ``α = exchange_s − nbytes/B`` for a message alone and
    for one among others (the primitive's ring steps run on every rank at once).

    Why: ``distml-lab calibrate`` fits α to the *median* ping-pong, right for a message timed
    alone. A step of the small GPT is a chain of dozens of blocking waits for tiny messages
    between short computations. On this 2-core VM (Linux 6.x, ``CONFIG_HZ=250``) the wait
    times are bimodal: most ~0.1–0.3 ms, but 5–15 % of them ~3–4 ms — the woken thread gets
    its core only at the next scheduler tick. A sum of waits costs their *mean*, and the mean
    of a wait between computations is what :func:`ring_steps` measures."""
    from dataclasses import replace

    from simulator.core.calibration import CalibrationError, find_entry

    try:
        entry = find_entry(world, "gloo", None, calibration)
    except CalibrationError:
        from lab.pipeline import local_cluster

        return local_cluster(world, calibration)
    alpha = max(exchange_s - nbytes / entry.bandwidth_Bps, 0.0)
    waited = replace(entry, latency_s=alpha, bus_latency_s=alpha if entry.bus_latency_s else 0)
    cluster = Cluster.from_calibration(waited)
    return cluster, (f"calibrated cluster {cluster.name}, α = {alpha * 1e6:.0f} µs (a ring "
                     f"step of {nbytes} B between computations; the calibration's median: "
                     f"{entry.latency_s * 1e6:.0f} µs)")


def measure_rank(points: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """Rank function: for each grid point, the real step's timing (slowest rank, median of
    barrier-aligned repeats; the points' repeats interleaved), and in the same rounds the
    waiting primitive (:func:`ring_steps`, :func:`fragments`): ``{"points": [...],
    "exchange_s": mean seconds a ring step adds to a chain of compute, "fragment_s": one
    fragment's mean, "exchange_back_to_back_s": a ring step's mean without compute}``."""
    from backends.measure import measure_many

    torch.set_num_threads(1)
    steps = []
    for fields in points:
        point = GridPoint(**fields)
        groups = tp.init_groups(point.t)
        model, opt = _model(point, groups["tensor"])
        dp_rank = torch.distributed.get_rank(groups["data"])
        tokens, targets = _batch(point, dp_rank)

        def step(model: tp.ParallelGPT = model, opt: torch.optim.Optimizer = opt,
                 tokens: torch.Tensor = tokens, targets: torch.Tensor = targets,
                 data: Any = groups["data"]) -> float:
            return tp.train_step(model, opt, tokens, targets, data)

        steps.append(step)
    timings = measure_many([*steps, ring_steps(), fragments(), ring_steps(compute=False)],
                           repeats=repeats, warmup=3, inner=1)
    chained, compute, bare = (statistics.mean(t.samples_s) / WAIT_COUNT
                              for t in timings[-3:])
    return {"points": [{**fields, **t.as_dict()}
                       for fields, t in zip(points, timings[:-3], strict=True)],
            "exchange_s": max(chained - compute, 0.0), "fragment_s": compute,
            "exchange_back_to_back_s": bare}


def mlp_speed_rank(hidden: int, tokens: int, repeats: int) -> dict[str, Any]:
    """Rank function: forward + backward of our :class:`~backends.tensor_parallel.ParallelMLP`
    and of PyTorch's ``parallelize_module`` (ColwiseParallel/RowwiseParallel) on the same
    weights and input, timed side by side (interleaved repeats)."""
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    from backends.measure import measure_many

    torch.set_num_threads(1)
    t = torch.distributed.get_world_size()
    torch.manual_seed(0)
    mlp = nn.Sequential()
    mlp.fc1 = nn.Linear(hidden, 4 * hidden)
    mlp.act = nn.GELU()
    mlp.fc2 = nn.Linear(4 * hidden, hidden)
    theirs = parallelize_module(mlp, init_device_mesh("cpu", (t,)),
                                {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    ours = tp.ParallelMLP(hidden)
    x = torch.randn(tokens, hidden)

    def run(module: nn.Module) -> None:
        xi = x.clone().requires_grad_()
        module(xi).sum().backward()

    ours_t, theirs_t = measure_many([lambda: run(ours), lambda: run(theirs)], repeats=repeats,
                                    warmup=3)
    return {"hidden": hidden, "tokens": tokens, "t": t, "ours": ours_t.as_dict(),
            "dtensor": theirs_t.as_dict(), "ratio": ours_t.median_s / theirs_t.median_s}


def point_fields(point: GridPoint) -> dict[str, Any]:
    """The point as plain fields (to send to rank processes)."""
    return asdict(point)


# ---- a probe: collectives alone and between computations ------------------------------------

def probe_ops(nbytes: int, compute_s: float, count: int) -> list[Op]:
    """``count`` × (``compute_s`` of compute, then an all-reduce of ``nbytes`` on the tensor
    group): the GPT step's pattern stripped to its bones."""
    return [op for _ in range(count)
            for op in (("compute", "", compute_s), ("all_reduce", "tensor", float(nbytes)))]


def probe_rank(nbytes: int, compute_s: float, count: int, repeats: int) -> dict[str, float]:
    """Rank function: median time of one all-reduce of ``nbytes`` alone (right after a
    barrier), of ``count`` of them back to back, and of :func:`probe_ops` run for real (a busy
    loop of ``compute_s`` before each all-reduce), s."""
    import torch.distributed as dist

    from backends.measure import measure_many

    torch.set_num_threads(1)
    x = torch.zeros(nbytes // 4)

    def alone() -> None:
        dist.all_reduce(x)

    def interleaved() -> None:
        for _ in range(count):
            end = time.perf_counter() + compute_s
            while time.perf_counter() < end:
                pass
            dist.all_reduce(x)

    def back_to_back() -> None:
        for _ in range(count):
            dist.all_reduce(x)

    a, b, c = measure_many([alone, back_to_back, interleaved], repeats=repeats, warmup=3,
                           inner=1)
    return {"alone_s": a.median_s, "back_to_back_s": b.median_s, "interleaved_s": c.median_s}
