"""Tensor parallelism on this machine: the small GPT's step predicted and measured (ch. 12).

* **profile** (:func:`profile_ops`, :func:`profile_stages`) — a rank's training step (or each
  pipeline stage's pieces) run with every collective replaced by a local stand-in
  (:class:`backends.tensor_parallel.ProfileGroup`): the seconds of compute between
  consecutive collectives, and each collective's kind, group and bytes — a compute profile
  (a primitive), in the order the rank runs it. *How* each piece is timed
  (:class:`Conditions`): on ``min(world, cores)`` processes at once, each stand-in a real
  blocking wait (one tiny ring step among them, :func:`wait_step`) because compute right
  after a thread slept runs much slower on this VM than in a warm loop; each piece at its
  slowest copy (a collective waits for the slowest rank); the mean over the samples (a
  chain costs the sum of the means); and, by default, in the same rounds as the measured
  steps (:func:`measure_rank` with ``profile_copies``), because the host drifts from minute
  to minute;
* **predict** (:func:`predict`) — the simulator replays those ops on every rank of this
  machine's calibrated cluster (``local_host_cluster``, its latency from the waiting primitive
  :func:`ring_steps`, :func:`waiting_cluster`): compute on a
  :class:`~simulator.core.cores.CorePool` of the host's cores (ranks are processes that
  time-share them), the all-reduces as gloo runs them, each segment a wait of its own
  (:func:`simulator.ddp.waited_gloo_all_reduce`), the all-gathers as gloo runs them too,
  two half-chunk messages per step
  (:func:`simulator.tensor_parallel.waited_gloo_all_gather`), the reduce-scatters as the
  lab's ring (:func:`simulator.collectives.reduce_scatter.ring_reduce_scatter`), each on its
  tensor or data group — the structure of :mod:`simulator.tensor_parallel`'s iteration
  (compute and tensor-group collectives per layer, then the data-parallel gradient
  all-reduce, then the optimizer), with measured compute instead of FLOPs at a GPU's peak;
* **measure** (:func:`measure_rank`) — the real step of
  :class:`backends.tensor_parallel.ParallelGPT` on spawned processes, barrier-aligned
  repeats of a few steps back to back (per step), the slowest rank's time
  (:func:`backends.measure.measure_many`).

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
from simulator.collectives.reduce_scatter import ring_reduce_scatter
from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.core.cores import CorePool
from simulator.core.hardware import Cluster
from simulator.ddp import waited_gloo_all_reduce
from simulator.host import cluster_from_entry
from simulator.tensor_parallel import waited_gloo_all_gather

Op = tuple[str, str, float]
"""``("compute", "", seconds)`` or ``(kind, group, bytes)`` with kind ``all_reduce``,
``all_gather`` or ``reduce_scatter`` and group ``tensor`` or ``data``."""


@dataclass(frozen=True)
class GridPoint:
    """One configuration: ``t × p × d`` ranks, sequence parallelism or not, the global batch
    (sequences per step, split over the ``d`` replicas) and, with ``p > 1``, the micro-batches
    per replica (1F1B on :mod:`backends.megatron`)."""

    t: int
    d: int
    sequence_parallel: bool = False
    global_batch: int = 8
    layers: int = 2
    hidden: int = 32
    heads: int = 4
    vocab: int = 64
    seq: int = 16
    p: int = 1
    microbatches: int = 1

    @property
    def world(self) -> int:
        return self.t * self.p * self.d

    @property
    def config(self) -> tp.GPTConfig:
        return tp.GPTConfig(self.layers, self.hidden, self.heads, self.vocab, self.seq)

    @property
    def name(self) -> str:
        pipe = f"p{self.p}" if self.p > 1 else ""
        micro = f"m{self.microbatches}" if self.p > 1 else ""
        return f"t{self.t}{pipe}d{self.d}{micro}{'-sp' if self.sequence_parallel else ''}"


def _model(point: GridPoint, tensor: Any) -> tuple[tp.ParallelGPT, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = tp.ParallelGPT(point.config, tensor, point.sequence_parallel)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def _batch(point: GridPoint, dp_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, targets = tp.lm_batch(point.config, point.global_batch, seed=1)
    return (tp.batch_shard(tokens, point.d, dp_rank), tp.batch_shard(targets, point.d, dp_rank))


@dataclass(frozen=True)
class Conditions:
    """How a profile times each piece of compute between collectives.

    * ``wait``: a blocking wait (:func:`wait_step`) run before each timed run and inside
      every stand-in collective, so each piece is timed right after the thread slept, as in
      a real step (``None``: back to back, a warm loop);
    * ``slowest``: given one run's pieces (s), each piece's largest time over the copies
      profiling at once (:func:`profile_together_rank`) — a collective waits for the slowest
      rank's piece, not a typical one;
    * ``statistic``: ``median`` or ``mean`` over the repeats (a chain of pieces costs the
      sum of their means).
    """

    wait: Any = None
    slowest: Any = None
    statistic: str = "median"


def _one_run(log: list[tuple[Any, ...]], run: Any, setup: Any, cond: Conditions) -> list[Op]:
    """One timed ``run(setup())``: the compute seconds between the collectives it logs in
    ``log`` (a :class:`~backends.tensor_parallel.ProfileGroup`'s), and those collectives."""
    arg = setup() if setup is not None else None
    log.clear()
    if cond.wait is not None:
        cond.wait()
    start = time.perf_counter()
    run(arg)
    end = time.perf_counter()
    ops: list[Op] = []
    last = start
    for kind, group, nbytes, entered, left in log:
        ops.append(("compute", "", entered - last))
        ops.append((kind, group, float(nbytes)))
        last = left
    ops.append(("compute", "", end - last))
    if cond.slowest is not None:
        pieces = iter(cond.slowest([v for k, _, v in ops if k == "compute"]))
        ops = [(k, g, next(pieces)) if k == "compute" else (k, g, v) for k, g, v in ops]
    return ops


def _summary(runs: list[list[Op]], statistic: str) -> list[Op]:
    """Each piece of compute's ``statistic`` (median, mean) over ``runs``, s."""
    shape = [(k, g, b) if k != "compute" else (k, g, 0.0) for k, g, b in runs[0]]
    for ops in runs:
        if [(k, g, b) if k != "compute" else (k, g, 0.0) for k, g, b in ops] != shape:
            raise RuntimeError("the step's collectives changed between repeats")
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic must be median or mean, got {statistic!r}")

    def stat(values: list[float]) -> float:
        return statistics.median(values) if statistic == "median" else statistics.fmean(values)

    return [(k, g, stat([r[j][2] for r in runs])) if k == "compute" else (k, g, b)
            for j, (k, g, b) in enumerate(runs[0])]


class Sampler:
    """Times a point's profile one sample at a time (every piece once per :meth:`sample`),
    so its samples can be interleaved with other measurements (:func:`measure_rank`);
    :meth:`result` summarizes them (:func:`profile_ops`, :func:`profile_stages`)."""

    def __init__(self, log: list[tuple[Any, ...]], pieces: list[tuple[Any, Any]],
                 assemble: Any, conditions: Conditions) -> None:
        self.log, self.pieces, self.assemble, self.conditions = log, pieces, assemble, conditions
        self.runs: list[list[list[Op]]] = [[] for _ in pieces]

    def sample(self) -> None:
        """Time every piece once."""
        for (run, setup), out in zip(self.pieces, self.runs, strict=True):
            out.append(_one_run(self.log, run, setup, self.conditions))

    def result(self, skip: int = 0) -> Any:
        """The profile from the samples after the first ``skip`` (warm-up)."""
        if len(self.runs[0]) <= skip:
            raise ValueError(f"{len(self.runs[0])} samples, {skip} of them warm-up")
        return self.assemble([_summary(r[skip:], self.conditions.statistic)
                              for r in self.runs])


def sampler(point: GridPoint, conditions: Conditions | None = None) -> Sampler:
    """The :class:`Sampler` of ``point``'s profile: a ``t × d`` step (:func:`profile_ops`)
    or every pipeline stage's pieces (:func:`profile_stages`)."""
    cond = conditions or Conditions()
    log: list[tuple[Any, ...]] = []
    if point.p > 1:
        pieces, assemble = _stage_pieces(point, log, cond)
        return Sampler(log, pieces, assemble, cond)
    tensor = tp.ProfileGroup(point.t, 0, "tensor", log, cond.wait)
    data = tp.ProfileGroup(point.d, 0, "data", log, cond.wait)
    model, opt = _model(point, tensor)
    tokens, targets = _batch(point, 0)
    return Sampler(log, [(lambda _: tp.train_step(model, opt, tokens, targets, data), None)],
                   lambda summaries: summaries[0], cond)


def _profiled(point: GridPoint, repeats: int, warmup: int,
              conditions: Conditions | None) -> Any:
    timed = sampler(point, conditions)
    for _ in range(warmup + repeats):
        timed.sample()
    return timed.result(warmup)


def profile_ops(point: GridPoint, repeats: int = 30, warmup: int = 5,
                conditions: Conditions | None = None) -> list[Op]:
    """One rank's step on ONE process (collectives stood in): median compute seconds
    between collectives, and the collectives (see the module docstring). ``p = 1`` only
    (:func:`profile_stages` for a pipeline). ``conditions``: how each piece is timed
    (:class:`Conditions`; default: back to back, median)."""
    if point.p != 1:
        raise ValueError("profile_ops profiles t × d grids; use profile_stages for p > 1")
    return _profiled(point, repeats, warmup, conditions)  # type: ignore[no-any-return]


def profile_together_rank(points: list[dict[str, Any]], repeats: int,
                          after_wait: bool = True, slowest: bool = False,
                          statistic: str = "median") -> list[Any]:
    """Rank function: every point's profile (:func:`profile_ops` or :func:`profile_stages`),
    with every spawned copy profiling the same point at the same time (a barrier before
    each). Spawned on ``min(world, cores)`` processes, it is the compute profile of a rank
    whose neighbours compute beside it on the other cores — sharing caches and memory
    bandwidth, as the real ranks do — without time-slicing one core (the simulator's
    :class:`~simulator.core.cores.CorePool` models that).

    ``after_wait`` (default): every stand-in collective, and the start of every timed run,
    is one blocking ring step of a tiny message among the profiling copies
    (:func:`wait_step`) — the compute is timed as in a real step, each piece right after the
    thread slept in a wait. On this VM that matters: a layer's forward right after a 2 ms
    blocking wait runs ~1.5–1.8× its time in a warm loop (dispatcher-heavy code refetched
    after the core idled; a matrix-product loop is not slowed — see the note of issue 9).
    ``slowest``: each piece's time is the largest over the copies (:class:`Conditions`);
    ``statistic``: ``median`` or ``mean`` over the repeats."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    together = dist.get_world_size() > 1
    conditions = Conditions(wait_step() if after_wait and together else None,
                            _slowest_over(None) if slowest and together else None, statistic)
    out = []
    for fields in points:
        point = GridPoint(**fields)
        dist.barrier()
        out.append(profile_ops(point, repeats, conditions=conditions) if point.p == 1
                   else profile_stages(point, repeats, conditions=conditions))
    return out


@dataclass(frozen=True)
class StageProfile:
    """One pipeline stage of a ``t × p × d`` point, profiled on ONE process: the ops of one
    micro-batch's forward (with the loss on the last stage) and backward, the bytes of the
    activation it sends on (0 on the last stage), and what follows the flush (gradient
    all-reduces on the tensor, data and embedding groups, the optimizer step)."""

    forward: list[Op]
    backward: list[Op]
    activation_bytes: int
    finish: list[Op]


def profile_stages(point: GridPoint, repeats: int = 30, warmup: int = 5,
                   conditions: Conditions | None = None) -> list[StageProfile]:
    """Each stage of :class:`backends.megatron.GridGPT` on ONE process (tensor collectives
    stood in by a :class:`~backends.tensor_parallel.ProfileGroup`), one micro-batch;
    ``conditions`` as in :func:`profile_ops` (with a wait, each forward, backward and
    optimizer step is timed right after one, as each follows a receive or a collective in
    the real step)."""
    if point.p == 1:
        raise ValueError("profile_stages profiles t × p × d grids with p > 1; use profile_ops")
    return _profiled(point, repeats, warmup, conditions)  # type: ignore[no-any-return]


def _stage_pieces(point: GridPoint, log: list[tuple[Any, ...]], cond: Conditions
                  ) -> tuple[list[tuple[Any, Any]], Any]:
    """Every stage's forward, backward and optimizer step as ``(run, setup)`` pieces, and
    the function that assembles their summaries into :class:`StageProfile` s."""
    from backends import megatron
    from backends.pipeline.partition import partition

    tensor = tp.ProfileGroup(point.t, 0, "tensor", log, cond.wait)
    model, _ = _model(point, tensor)
    layers = megatron.stages(model)
    parts = partition(layers, megatron.even_balance(len(layers), point.p))
    local = point.global_batch // point.d
    if local % point.microbatches:
        raise ValueError(f"{local} sequences per replica do not split into "
                         f"{point.microbatches} micro-batches")
    tokens, targets = tp.lm_batch(point.config, local // point.microbatches, seed=1)
    pieces: list[tuple[Any, Any]] = []
    shapes: list[tuple[int, list[Op]]] = []
    x: torch.Tensor = tokens
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        inp = x if k == 0 else x.detach().requires_grad_()

        def forward(_: Any = None, part: Any = part, inp: torch.Tensor = inp,
                    last: bool = last) -> torch.Tensor:
            y = part(inp)
            if last:
                y = tp.vocab_parallel_cross_entropy(y, targets.t(), tensor).mean()
            return y  # type: ignore[no-any-return]

        y = forward()
        grad = None if last else torch.ones_like(y)
        params = list(part.parameters())
        opt = torch.optim.SGD(params, lr=0.01)
        for q in params:
            q.grad = torch.zeros_like(q)
        pieces += [(forward, None),
                   (lambda y, grad=grad: torch.autograd.backward(y, grad), forward),
                   (lambda _, opt=opt, params=params: opt.step(), None)]
        finish: list[Op] = []
        partial = sum(q.numel() for q in params if getattr(q, "sequence_parallel", False))
        if partial and point.t > 1:
            finish.append(("all_reduce", "tensor", 4.0 * partial))
        if point.d > 1:
            finish.append(("all_reduce", "data", 4.0 * sum(q.numel() for q in params)))
        if point.p > 1 and (k == 0 or last):
            finish.append(("all_reduce", "embedding", 4.0 * model.wte.weight.numel()))
        shapes.append((0 if last else 4 * y.numel(), finish))
        x = y.detach()

    def assemble(summaries: list[list[Op]]) -> list[StageProfile]:
        out = []
        for k, (activation_bytes, finish) in enumerate(shapes):
            fwd, bwd, step = summaries[3 * k:3 * k + 3]
            # the optimizer steps after the reductions
            out.append(StageProfile(fwd, bwd, activation_bytes,
                                    [*finish, ("compute", "", _compute(step))]))
        return out

    return pieces, assemble


def _replay(comm: SimComm, ops: Sequence[Op], groups: dict[str, SimComm | None],
            pool: CorePool | None) -> SimGen:
    """Run ``ops`` on this rank: compute on the shared cores, collectives on the groups:
    ``dist.all_reduce`` and ``dist.all_gather`` as gloo runs them, the reduce-scatter as the
    lab's ring (:func:`backends.tensor_parallel._reduce_scatter`)."""
    for kind, group, value in ops:
        if kind == "compute":
            start = comm.now
            if pool is None:
                yield comm.env.timeout(value)
            else:
                yield from pool.run(value)
            comm.span("compute", "compute", start)
            continue
        sub = groups[group]
        assert sub is not None
        if kind == "all_reduce":
            yield from waited_gloo_all_reduce(sub, int(value), 4)
        elif kind == "all_gather":
            yield from waited_gloo_all_gather(sub, int(value), 4)
        else:
            yield from ring_reduce_scatter(sub, int(value), 4)


def _groups(comm: SimComm, point: GridPoint) -> dict[str, SimComm | None]:
    grid = tp.megatron_groups(point.world, point.t, point.p)
    mine = [g for g in grid.embedding if comm.rank in g and len(g) > 1]
    return {"tensor": comm.new_group(grid.of("tensor", comm.rank)),
            "data": comm.new_group(grid.of("data", comm.rank)),
            "embedding": comm.new_group(mine[0]) if mine else None}


def _pool(comm: SimComm, shared: dict[str, Any]) -> CorePool | None:
    if math.isinf(shared["cores"]):
        return None
    pool: CorePool = shared.setdefault("pool", CorePool(comm.env, shared["cores"]))
    return pool


def _rank_program(comm: SimComm, ops: Sequence[Op], point: GridPoint,
                  shared: dict[str, Any]) -> SimGen:
    """Replay ``ops`` on this rank: compute on the shared cores, collectives on the groups."""
    yield from _replay(comm, ops, _groups(comm, point), _pool(comm, shared))


def _pipeline_rank_program(comm: SimComm, stages: Sequence[StageProfile], point: GridPoint,
                           shared: dict[str, Any]) -> SimGen:
    """This rank's stage of a ``t × p × d`` step, as :class:`backends.pipeline.runtime.Pipeline`
    runs it: every receive posted up front, the 1F1B actions
    (:mod:`simulator.pipeline.schedules`, the runtime's own lists) each waiting for its
    input, replaying the stage's profiled ops and sending its output on; after the flush the
    gradient all-reduces and the optimizer (:class:`backends.megatron.GridGPT`)."""
    from simulator.pipeline.schedules import SCHEDULES

    groups, pool = _groups(comm, point), _pool(comm, shared)
    grid = tp.megatron_groups(point.world, point.t, point.p)
    pipe = grid.of("pipeline", comm.rank)
    k, m = pipe.index(comm.rank), point.microbatches
    me = stages[k]
    prev = pipe[k - 1] if k > 0 else None
    nxt = pipe[k + 1] if k < point.p - 1 else None
    recvs = {}
    for i in range(m):
        if prev is not None:
            recvs[("F", i)] = comm.irecv(prev, stages[k - 1].activation_bytes, 2 * i)
        if nxt is not None:
            recvs[("B", i)] = comm.irecv(nxt, me.activation_bytes, 2 * i + 1)
    sends = []
    for action in SCHEDULES["1f1b"](point.p, m)[k]:
        i = action.microbatch
        if action.kind == "F":
            if prev is not None:
                yield recvs.pop(("F", i)).wait()
            yield from _replay(comm, me.forward, groups, pool)
            if nxt is not None:
                sends.append(comm.isend(nxt, me.activation_bytes, 2 * i))
        else:
            if nxt is not None:
                yield recvs.pop(("B", i)).wait()
            yield from _replay(comm, me.backward, groups, pool)
            if prev is not None:
                sends.append(comm.isend(prev, stages[k - 1].activation_bytes, 2 * i + 1))
    yield from _replay(comm, me.finish, groups, pool)
    for send in sends:
        yield send.wait()


def predict(point: GridPoint, ops: Sequence[Op] | Sequence[StageProfile], cluster: Cluster,
            cores: float = math.inf) -> float:
    """Predicted step time on ``cluster`` (``t·p·d`` ranks), ranks sharing ``cores``, s:
    ``ops`` from :func:`profile_ops` (``p = 1``) or :func:`profile_stages`."""
    if cluster.world_size != point.world:
        raise ValueError(f"the cluster has {cluster.world_size} ranks, the grid {point.world}")
    program = _pipeline_rank_program if point.p > 1 else _rank_program
    return run_spmd(cluster, program, ops, point, {"cores": cores}, trace=False).makespan_s


def compute_seconds(ops: Sequence[Op] | Sequence[StageProfile], microbatches: int = 1
                    ) -> float:
    """One rank's compute in a step (the profile's sum; with stages, the busiest stage's
    ``m`` forwards and backwards and its finish), s."""
    if ops and isinstance(ops[0], StageProfile):
        return max(microbatches * (_compute(st.forward) + _compute(st.backward))
                   + _compute(st.finish) for st in ops if isinstance(st, StageProfile))
    return _compute(ops)  # type: ignore[arg-type]


def _compute(ops: Sequence[Op]) -> float:
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


def wait_step(nbytes: int = WAIT_BYTES, group: Any = None) -> Any:
    """One blocking ring step of ``nbytes`` on ``group`` with no compute (:func:`ring_steps`
    with ``count = 1``): the wait a profile puts before each piece of compute it times
    (:func:`profile_together_rank`); every process of the group must call it alike."""
    return ring_steps(nbytes, 1, group, compute=False)


def fragments(count: int = WAIT_COUNT) -> Any:
    """``count`` compute fragments of :func:`ring_steps`, no messages."""
    fragment = _fragment()
    return lambda: [fragment() for _ in range(count)]


def waiting_cluster(world: int, exchange_s: float, nbytes: int = WAIT_BYTES,
                    calibration: str | None = None) -> tuple[Cluster, str]:
    """This machine's calibrated cluster (``local_host_cluster``) with the latency of a message
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
    waited = replace(entry, latency_s=alpha, bus_latency_s=alpha if entry.bus_latency_s else 0,
                     chain_latency_s=[], chain_ahead_latency_s=[])  # every message pays α
    cluster = cluster_from_entry(waited)
    return cluster, (f"calibrated cluster {cluster.name}, α = {alpha * 1e6:.0f} µs (a ring "
                     f"step of {nbytes} B between computations; the calibration's median: "
                     f"{entry.latency_s * 1e6:.0f} µs)")


def measure_rank(points: list[dict[str, Any]], repeats: int, per_sample: int = 1,
                 profile_copies: int = 0, slowest: bool = True, statistic: str = "mean"
                 ) -> dict[str, Any]:
    """Rank function: for each grid point, the real step's timing (slowest rank, median of
    barrier-aligned repeats of ``per_sample`` steps back to back, per step; the points'
    repeats interleaved), and in the same rounds the waiting primitive (:func:`ring_steps`,
    :func:`fragments`): ``{"points": [...], "exchange_s": mean seconds a ring step adds to a
    chain of compute, "fragment_s": one fragment's mean, "exchange_back_to_back_s": a ring
    step's mean without compute}``.

    ``profile_copies > 0``: also each point's compute profile, in the same rounds, on the
    first ``profile_copies`` ranks at once (the others idle meanwhile), each piece right
    after a blocking ring step among them (:func:`wait_step`), the slowest copy's time
    (``slowest``), ``statistic`` over the samples — the profile of
    :func:`profile_together_rank`, taken under the same conditions of the host as the steps
    it predicts (on this VM they drift from minute to minute). Under ``"profiles"``: one
    entry per point (:func:`profile_ops` / :func:`profile_stages` results)."""
    import torch.distributed as dist

    from backends.measure import measure_many

    torch.set_num_threads(1)
    samplers: list[Sampler] = []
    profiling: list[Any] = []
    if profile_copies > 0:
        copies = min(profile_copies, dist.get_world_size())
        team = dist.new_group(list(range(copies)))  # every rank calls new_group
        if dist.get_rank() < copies:
            conditions = Conditions(
                wait_step(group=team) if copies > 1 else None,
                _slowest_over(team) if slowest and copies > 1 else None, statistic)
            samplers = [sampler(GridPoint(**fields), conditions) for fields in points]
            profiling = [timed.sample for timed in samplers]
        else:
            profiling = [_idle for _ in points]
    steps = []
    for fields in points:
        point = GridPoint(**fields)
        if point.p > 1:
            steps.append(_grid_step(point))
            continue
        groups = tp.init_groups(point.t)
        model, opt = _model(point, groups["tensor"])
        dp_rank = torch.distributed.get_rank(groups["data"])
        tokens, targets = _batch(point, dp_rank)

        def step(model: tp.ParallelGPT = model, opt: torch.optim.Optimizer = opt,
                 tokens: torch.Tensor = tokens, targets: torch.Tensor = targets,
                 data: Any = groups["data"]) -> float:
            return tp.train_step(model, opt, tokens, targets, data)

        steps.append(step)
    warmup = 3
    timings = measure_many([*steps, ring_steps(), fragments(), ring_steps(compute=False),
                            *profiling], repeats=repeats, warmup=warmup, inner=per_sample)
    chained, compute, bare = (statistics.mean(t.samples_s) / WAIT_COUNT
                              for t in timings[len(steps):len(steps) + 3])
    out = {"points": [{**fields, **t.as_dict()}
                      for fields, t in zip(points, timings[:len(steps)], strict=True)],
           "exchange_s": max(chained - compute, 0.0), "fragment_s": compute,
           "exchange_back_to_back_s": bare}
    if samplers:
        out["profiles"] = [timed.result(warmup) for timed in samplers]
    return out


def _idle() -> None:
    """What a rank that does not profile runs while the others do."""


def _slowest_over(group: Any) -> Any:
    """:attr:`Conditions.slowest` over the processes of ``group``."""
    import torch.distributed as dist

    def slowest(pieces: list[float]) -> list[float]:
        t = torch.tensor(pieces, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        return [float(v) for v in t]

    return slowest


def _grid_step(point: GridPoint) -> Any:
    """This rank's training step of a ``p > 1`` point (:class:`backends.megatron.GridGPT`)."""
    from backends import megatron

    grid = megatron.GridRank.create(point.t, point.p)
    torch.manual_seed(0)
    trained = megatron.GridGPT(point.config, grid, point.microbatches, point.sequence_parallel)
    opt = torch.optim.SGD(trained.parameters(), lr=0.01)
    tokens, targets = _batch(point, grid.dp_rank)
    return lambda: trained.train_step(opt, tokens, targets)


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
