"""Megatron-LM's 3D parallelism, simulated: tensor (t) × pipeline (p) × data (d) on a cluster.

Twin of :mod:`backends.tensor_parallel` (book chapter 12). A GPT (:mod:`simulator.transformer`)
trains on ``t·p·d`` GPUs, placed the way Megatron places them (Narayanan et al., SC 2021,
§3; Megatron-LM's ``initialize_model_parallel``)::

    global rank = pp·(t·d) + dp·t + tp        tensor groups: t consecutive ranks (one node)
                                              data groups:   stride t
                                              pipeline:      stride t·d

Each rank runs the schedule of :mod:`simulator.pipeline.schedules` (1F1B, or interleaved 1F1B
with ``v`` chunks). Inside every layer, forward and backward, the rank computes its ``1/t`` of
the matrix multiplications and joins its tensor group's all-reduces (Shoeybi et al. 2019: the
``g`` operator after the attention and after the MLP in the forward, the ``f`` operator before
each in the backward) — all-gathers and reduce-scatters instead with sequence parallelism
(Korthikanti et al. 2022). Between stages it sends ``b·s·h/t`` elements (scatter/gather,
Narayanan et al. §4.1), which the receivers all-gather inside their node. After the pipeline
flush each stage ring-all-reduces its gradients over its data group (optionally overlapped
with the last backward), the first and last stages all-reduce the shared word embedding's
gradient, and every rank steps its optimizer (Adam, memory bound).

**Two ways to run it.** :func:`simulate_megatron_full` runs one SimPy process per GPU with
every message on the cluster's network (the reference, fine for tens of GPUs).
:func:`simulate_megatron` is the fast path for thousands: it relies on the symmetry of the
grid —

1. every tensor group runs the same all-reduces at the same moments, on its own NVLink ports:
   one all-reduce is timed once, on the ``t`` GPUs of one group
   (:func:`~simulator.collectives.all_reduce.ring_phases_fast`), and added into each layer's
   time;
2. the ``t·d`` pipelines are identical and each uses only its own GPUs' ports: *one*
   pipeline, ``p`` ranks on a :func:`subcluster` that keeps their real links, is simulated by
   :func:`~simulator.pipeline.simulate.simulate_pipeline`, one "layer" per model chunk;
3. the ``t·p`` data-parallel rings all start when their stage finishes, each on its own
   ports: one ring per stage is timed on a :func:`subcluster` of its ``d`` GPUs; the
   embedding all-reduce is a two-rank simulation started at the two stages' finish times.

On :meth:`~simulator.core.hardware.Cluster.dgx` clusters every GPU has its own NVLink port
and its own NIC and the fabric never blocks, so different groups never share a channel: the
fast path then equals the full simulation (tests check it to 1e-9) — except when two pipeline
stages share a node, where the full simulation lets a stage's activation sends share an
NVLink port with its tensor all-reduces and the fast path does not. The overlapped gradient
all-reduce exists only on the fast path (buckets serialised, see :func:`_overlapped`).

Compute takes ``FLOPs / (peak · matmul_efficiency)`` for the matrix multiplications
(Narayanan et al.'s FLOP count) plus ``bytes / HBM bandwidth`` for the elementwise kernels
(layer norm, softmax, dropout, GeLU, residual: :func:`~simulator.transformer.
attention_elementwise_bytes`), both from the device's data sheet. At
``matmul_efficiency = 1`` the prediction is a bound that GEMM kernels below peak lower
(``benchmarks/megatron_validation.py`` says how much).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from simulator.collectives.all_gather import ring_all_gather
from simulator.collectives.all_reduce import ring_all_reduce, ring_phases_fast
from simulator.collectives.exchange import sendrecv
from simulator.collectives.reduce_scatter import ring_reduce_scatter
from simulator.core.comm import SimComm, SimGen, SimResult, SimWork, run_spmd
from simulator.core.hardware import Cluster
from simulator.core.network import Link, Node, Topology
from simulator.pipeline import LayerProfile, simulate_pipeline
from simulator.pipeline.schedules import (
    Action,
    Schedule,
    in_flight,
    interleaved_1f1b,
    one_f_one_b,
)
from simulator.transformer import (
    FP16,
    GPT,
    RECOMPUTE_MODES,
    Recompute,
    activation_bytes_per_layer,
    attention_core_flops,
    attention_elementwise_bytes,
    attention_forward_flops,
    embedding_activation_bytes,
    full_activation_bytes_per_layer,
    iteration_flops,
    layer_parameters,
    logit_forward_flops,
    mlp_elementwise_bytes,
    mlp_forward_flops,
    output_activation_bytes,
    parameters,
)
from simulator.zero import bytes_per_parameter

ADAM_BYTES_PER_PARAMETER = 28
"""Bytes the mixed-precision Adam step moves per parameter: reads the fp16 gradient and the
fp32 master weight, momentum and variance, writes those three and the fp16 weight
(2 + 12 + 12 + 2): a memory-bound kernel."""


# ---- the grid ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Grid:
    """``t × p × d`` GPUs in Megatron's order: ``rank = pp·t·d + dp·t + tp``."""

    t: int
    p: int
    d: int

    def __post_init__(self) -> None:
        for name in ("t", "p", "d"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    @property
    def world_size(self) -> int:
        """``t·p·d`` GPUs."""
        return self.t * self.p * self.d

    def rank(self, tp: int, dp: int, pp: int) -> int:
        """The global rank at grid coordinates (tensor, data, pipeline)."""
        return pp * self.t * self.d + dp * self.t + tp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """``(tp, dp, pp)`` of a global rank."""
        return rank % self.t, rank // self.t % self.d, rank // (self.t * self.d)

    def tensor_group(self, rank: int) -> list[int]:
        """The ``t`` ranks that split this rank's layers."""
        _, dp, pp = self.coords(rank)
        return [self.rank(i, dp, pp) for i in range(self.t)]

    def data_group(self, rank: int) -> list[int]:
        """The ``d`` replicas of this rank's shard, which all-reduce its gradients."""
        tp, _, pp = self.coords(rank)
        return [self.rank(tp, i, pp) for i in range(self.d)]

    def pipeline_group(self, rank: int) -> list[int]:
        """The ``p`` stages this rank's micro-batches flow through."""
        tp, dp, _ = self.coords(rank)
        return [self.rank(tp, dp, i) for i in range(self.p)]

    def draw(self, gpus_per_node: int = 8) -> str:
        """Every rank's ``(tp, dp, pp)``, node by node (the chapter's 3D grid, as text)."""
        rows = []
        for first in range(0, self.world_size, gpus_per_node):
            cells = [f"{r}:t{tp}d{dp}p{pp}"
                     for r in range(first, min(first + gpus_per_node, self.world_size))
                     for tp, dp, pp in [self.coords(r)]]
            rows.append(f"node {first // gpus_per_node}: " + " ".join(cells))
        return "\n".join(rows)


@dataclass(frozen=True)
class MegatronConfig:
    """One training configuration.

    Attributes:
        model: the GPT.
        grid: ``t × p × d``.
        global_batch: ``B`` sequences per iteration.
        micro_batch: ``b`` sequences per micro-batch; ``m = B/(b·d)`` micro-batches.
        recompute: ``none``, ``selective`` or ``full`` activation recomputation.
        sequence_parallel: split layer norm and dropout along the sequence (Korthikanti
            et al.): all-gather/reduce-scatter instead of all-reduce.
        interleave: ``v`` model chunks per pipeline rank (interleaved 1F1B; 1 = plain 1F1B).
        overlap_grad_reduce: all-reduce gradients during the last backward (fast path only).
        scatter_gather: send ``1/t`` of each activation between stages and all-gather it.
        matmul_efficiency: achieved fraction of the device's peak FLOP/s for the matrix
            multiplications (1.0: the data sheet's peak).
    """

    model: GPT
    grid: Grid
    global_batch: int
    micro_batch: int
    recompute: Recompute = "full"
    sequence_parallel: bool = False
    interleave: int = 1
    overlap_grad_reduce: bool = False
    scatter_gather: bool = True
    matmul_efficiency: float = 1.0

    def __post_init__(self) -> None:
        g, model = self.grid, self.model
        if self.recompute not in RECOMPUTE_MODES:
            raise ValueError(f"unknown recompute mode {self.recompute!r}; choose none, "
                             "selective or full")
        if self.micro_batch < 1 or self.global_batch < 1:
            raise ValueError("the global batch and the micro-batch need at least 1 sequence")
        if self.global_batch % (self.micro_batch * g.d):
            raise ValueError(f"global batch {self.global_batch} does not split into "
                             f"micro-batches of {self.micro_batch} on {g.d} data-parallel "
                             "replicas")
        if model.heads % g.t:
            raise ValueError(f"{model.heads} attention heads do not split over t = {g.t}")
        if self.interleave < 1:
            raise ValueError(f"interleave must be at least 1, got {self.interleave}")
        if model.layers % (g.p * self.interleave):
            raise ValueError(f"{model.layers} layers do not split into {g.p} stages × "
                             f"{self.interleave} chunks")
        if self.interleave > 1 and (g.p == 1 or self.microbatches % g.p):
            raise ValueError(f"interleaving needs p > 1 and micro-batches ({self.microbatches})"
                             f" a multiple of p = {g.p}")
        if not 0 < self.matmul_efficiency <= 1:
            raise ValueError(f"matmul efficiency must be in (0, 1], got "
                             f"{self.matmul_efficiency}")

    @property
    def microbatches(self) -> int:
        """``m = B/(b·d)``, per pipeline and iteration."""
        return self.global_batch // (self.micro_batch * self.grid.d)

    @property
    def chunks(self) -> int:
        """Virtual stages ``p·v``."""
        return self.grid.p * self.interleave

    def schedule(self) -> Schedule:
        """The pipeline schedule every pipeline runs."""
        p, m, v = self.grid.p, self.microbatches, self.interleave
        return interleaved_1f1b(p, m, v) if v > 1 else one_f_one_b(p, m)


# ---- what one chunk does ------------------------------------------------------------------

Op = tuple[str, float]
"""``("compute", seconds)`` or (``"all_reduce"`` | ``"all_gather"`` | ``"reduce_scatter"``,
bytes over the tensor group)."""


@dataclass(frozen=True)
class Chunk:
    """One virtual stage (a model chunk) on one rank, for one micro-batch.

    Attributes:
        forward / backward: the ops in order (a backward starts with the recomputation).
        stash_bytes: activation bytes kept from its forward to its backward.
        transient_bytes: extra bytes alive during its backward (recomputed activations).
        input_bytes / output_bytes: bytes received from / sent to the neighbouring stage.
        parameters: parameters this rank holds for the chunk.
    """

    forward: tuple[Op, ...]
    backward: tuple[Op, ...]
    stash_bytes: float
    transient_bytes: float
    input_bytes: int
    output_bytes: int
    parameters: int


def _layer_ops(config: MegatronConfig, flops_per_s: float,
               mem_bandwidth_Bps: float) -> tuple[list[Op], list[Op]]:
    """A transformer layer's forward and backward ops on one tensor-parallel rank.

    A block's compute is its matrix multiplications at ``flops_per_s`` plus its elementwise
    kernels' HBM bytes at ``mem_bandwidth_Bps``; backward costs twice the forward (twice the
    FLOPs; for the elementwise kernels, reading the saved tensors and the gradients and
    writing gradients — our assumption).
    """
    model, b, t, sp = config.model, config.micro_batch, config.grid.t, config.sequence_parallel
    n = FP16 * b * model.seq * model.hidden  # bytes of one b×s×h activation

    def sec(flops: float, nbytes: float = 0.0) -> Op:
        return ("compute", flops / t / flops_per_s + nbytes / mem_bandwidth_Bps)

    attention = sec(attention_forward_flops(model, b),
                    attention_elementwise_bytes(model, b, t, sp))
    mlp = sec(mlp_forward_flops(model, b), mlp_elementwise_bytes(model, b, t, sp))
    if t == 1:
        forward = [attention, mlp]
        backward_mlp = [("compute", 2 * mlp[1])]
        backward_attention = [("compute", 2 * attention[1])]
    elif config.sequence_parallel:  # g: all-gather fwd / reduce-scatter bwd; ḡ the reverse
        forward = [("all_gather", n), attention, ("reduce_scatter", n),
                   ("all_gather", n), mlp, ("reduce_scatter", n)]
        backward_mlp = [("all_gather", n), ("compute", 2 * mlp[1]), ("reduce_scatter", n)]
        backward_attention = [("all_gather", n), ("compute", 2 * attention[1]),
                              ("reduce_scatter", n)]
    else:  # g after each block in the forward, f before each in the backward
        forward = [attention, ("all_reduce", n), mlp, ("all_reduce", n)]
        backward_mlp = [("compute", 2 * mlp[1]), ("all_reduce", n)]
        backward_attention = [("compute", 2 * attention[1]), ("all_reduce", n)]
    if config.recompute == "full":
        again = list(forward)
    elif config.recompute == "selective":
        softmax = 9 * model.heads * model.seq ** 2 * b / t  # softmax and its dropout again
        again = [sec(attention_core_flops(model, b), softmax)]
    else:
        again = []
    return forward, again + backward_mlp + backward_attention


def chunks(config: MegatronConfig, flops_per_s: float,
           mem_bandwidth_Bps: float = math.inf) -> list[Chunk]:
    """The ``p·v`` virtual stages, in pipeline order, as one tensor-parallel rank runs them.

    The first chunk also holds the word and position embeddings (vocabulary-parallel: an
    all-reduce — a reduce-scatter with sequence parallelism — of its output); the last one
    the final layer norm and the output layer (the logits ``2bshV/t`` FLOPs, the gradient of
    its input all-reduced in the backward). A chunk after the first all-gathers its input
    when ``scatter_gather`` sends ``1/t`` of it (not needed with sequence parallelism).
    ``mem_bandwidth_Bps`` prices the elementwise kernels (``math.inf``: free).
    """
    model, g, b = config.model, config.grid, config.micro_batch
    t, k = g.t, config.chunks
    per_chunk = model.layers // k
    n = FP16 * b * model.seq * model.hidden
    layer_fwd, layer_bwd = _layer_ops(config, flops_per_s, mem_bandwidth_Bps)
    stash = activation_bytes_per_layer(model, b, t, config.sequence_parallel, config.recompute)
    transient = 0.0 if config.recompute == "none" else (
        full_activation_bytes_per_layer(model, b, t, config.sequence_parallel) - stash)
    split = t > 1 and (config.scatter_gather or config.sequence_parallel)
    p2p = n // t if split else n
    gather: list[Op] = [("all_gather", n)] if t > 1 and split and not config.sequence_parallel \
        else []
    logits = logit_forward_flops(model, b) / t / flops_per_s
    out: list[Chunk] = []
    for j in range(k):
        fwd: list[Op] = (gather if j > 0 else []) + layer_fwd * per_chunk
        bwd: list[Op] = list(layer_bwd * per_chunk)
        params = per_chunk * layer_parameters(model) // t
        kept = per_chunk * stash
        if j == 0:
            if t > 1:  # the vocabulary-parallel embedding sums its slices (backward: identity)
                fwd.insert(0, ("reduce_scatter" if config.sequence_parallel else "all_reduce", n))
                if config.sequence_parallel:
                    bwd.append(("all_gather", n))
            params += model.vocab * model.hidden // t + model.seq * model.hidden
            kept += embedding_activation_bytes(model, b, t, config.sequence_parallel)
        if j == k - 1:  # final layer norm and the column-parallel output layer
            if config.sequence_parallel and t > 1:
                fwd.append(("all_gather", n))
            fwd.append(("compute", logits))
            head: list[Op] = [("compute", 2 * logits)]
            if t > 1:  # f: identity forward, all-reduce backward (ḡ's reverse with sp)
                head.append(("reduce_scatter" if config.sequence_parallel else "all_reduce", n))
            bwd = head + bwd
            if k > 1:
                params += model.vocab * model.hidden // t  # the tied output embedding
            kept += output_activation_bytes(model, b, t)
        else:
            bwd = gather + bwd  # the output gradient arrives as 1/t slices too
        out.append(Chunk(tuple(fwd), tuple(bwd), kept, transient, p2p if j > 0 else 0, p2p,
                         params))
    return out


# ---- clusters cut to one group ------------------------------------------------------------

def subcluster(cluster: Cluster, ranks: Sequence[int]) -> Cluster:
    """The ranks ``ranks`` of ``cluster`` (renumbered ``0…k−1``) with their own links: every
    link at one of them, every switch-to-switch link, and the full cluster's routes.

    Exact for traffic among these ranks while no other rank's traffic crosses the same
    channels (the symmetry the fast path relies on). Needs routes that go through switches,
    not through other ranks (true of every builder but ``ring`` and ``fully_connected``).
    """
    local: dict[int, int] = {g: i for i, g in enumerate(ranks)}
    if len(local) != len(ranks):
        raise ValueError("a subcluster lists a rank twice")
    full = cluster.topology

    def rename(node: Node) -> Node:
        if isinstance(node, str):
            return node
        if node not in local:
            raise ValueError(f"route passes through rank {node}, outside the subcluster")
        return local[node]

    links: dict[frozenset[Node], Link] = {}
    switches: list[Node] = []
    for g in ranks:  # the ranks' own links, and the switches they reach
        for node in full._adjacent.get(g, []):
            if isinstance(node, int) and node not in local:
                continue
            links[frozenset((local[g], rename(node)))] = full.links[frozenset((g, node))]
            if isinstance(node, str) and node not in switches:
                switches.append(node)
    for switch in switches:  # then every switch-to-switch link beyond them
        for node in full._adjacent.get(switch, []):
            if isinstance(node, str):
                links[frozenset((switch, node))] = full.links[frozenset((switch, node))]
                if node not in switches:
                    switches.append(node)

    def router(topo: Topology, src: int, dst: int) -> list[Node]:
        if src == dst:
            return [src]
        channels = full.route(ranks[src], ranks[dst])
        return [src] + [rename(c[1]) for c in channels]

    topology = Topology(len(ranks), links, f"{full.name}[{len(ranks)}]", router)
    return Cluster(f"{cluster.name}[{len(ranks)}]",
                   tuple(cluster.devices[g] for g in ranks), topology, cluster.buffered_sends,
                   send_buffer_bytes=cluster.send_buffer_bytes)


# ---- results -------------------------------------------------------------------------------

@dataclass(frozen=True)
class MegatronResult:
    """One simulated iteration.

    Attributes:
        config: what was simulated.
        cluster: the cluster's name.
        iteration_time_s: the iteration, s (last rank's optimizer step done).
        pipeline_time_s: the pipeline part (forwards, backwards, flush), s.
        stage_finish_s: per stage, when its pipeline work ended, s.
        data_parallel_s: per stage, its gradient all-reduce, s (exposed part if overlapped).
        embedding_all_reduce_s: the first/last stage's embedding gradient all-reduce, s.
        update_s: per stage, the optimizer step, s.
        bubble_fraction: idle share of the pipeline part, from the simulation.
        tensor_all_reduce_s: one tensor-parallel all-reduce of ``b·s·h`` fp16 values, s.
        memory: per stage, bytes per GPU by part.
        flops: hardware FLOPs of the iteration (with the recomputation done).
        model_flops: FLOPs of the iteration without recomputation.
        extra: with ``trace``, ``{"pipeline": PipelineResult}`` of the simulated pipeline
            (its timeline); not part of :meth:`as_dict`.
    """

    config: MegatronConfig
    cluster: str
    iteration_time_s: float
    pipeline_time_s: float
    stage_finish_s: list[float]
    data_parallel_s: list[float]
    embedding_all_reduce_s: float
    update_s: list[float]
    bubble_fraction: float
    tensor_all_reduce_s: float
    memory: list[dict[str, float]]
    flops: float
    model_flops: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        """``t·p·d``."""
        return self.config.grid.world_size

    @property
    def tflops_per_gpu(self) -> float:
        """Hardware TFLOP/s per GPU, Narayanan et al.'s metric (recomputation counted)."""
        return self.flops / self.iteration_time_s / self.gpus / 1e12

    @property
    def memory_per_gpu_bytes(self) -> float:
        """The fullest GPU's bytes."""
        return max(m["total"] for m in self.memory)

    def as_dict(self) -> dict[str, Any]:
        """The document ``distml-lab simulate megatron --json`` prints."""
        c, g = self.config, self.config.grid
        worst = max(range(len(self.memory)), key=lambda k: self.memory[k]["total"])
        return {
            "model": c.model.name, "layers": c.model.layers, "hidden": c.model.hidden,
            "heads": c.model.heads, "seq": c.model.seq, "vocab": c.model.vocab,
            "params": parameters(c.model), "tp": g.t, "pp": g.p, "dp": g.d, "gpus": g.world_size,
            "global_batch": c.global_batch, "micro_batch": c.micro_batch,
            "microbatches": c.microbatches, "interleave": c.interleave,
            "recompute": c.recompute, "sequence_parallel": c.sequence_parallel,
            "overlap_grad_reduce": c.overlap_grad_reduce,
            "matmul_efficiency": c.matmul_efficiency, "cluster": self.cluster,
            "iteration_time_s": self.iteration_time_s,
            "pipeline_time_s": self.pipeline_time_s,
            "data_parallel_all_reduce_s": max(self.data_parallel_s),
            "embedding_all_reduce_s": self.embedding_all_reduce_s,
            "optimizer_step_s": max(self.update_s),
            "tensor_all_reduce_s": self.tensor_all_reduce_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "model_tflops_per_gpu": self.model_flops / self.iteration_time_s / self.gpus / 1e12,
            "samples_per_s": c.global_batch / self.iteration_time_s,
            "bubble_fraction": self.bubble_fraction,
            "bubble_fraction_formula": (g.p - 1) / (c.interleave * c.microbatches + g.p - 1),
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
            "memory": {k: v for k, v in self.memory[worst].items() if k != "total"},
            "memory_stage": worst,
        }


def update_seconds(params: int, mem_bandwidth_Bps: float) -> float:
    """Adam's step over ``params`` parameters at the device's memory bandwidth, s."""
    return params * ADAM_BYTES_PER_PARAMETER / mem_bandwidth_Bps


def memory_per_stage(config: MegatronConfig, parts: Sequence[Chunk]) -> list[dict[str, float]]:
    """Bytes per GPU of each pipeline stage: model states (mixed-precision Adam, ZeRO's
    ``2 + 2 + 12`` bytes per parameter) and activations (what the schedule keeps in flight,
    :func:`~simulator.pipeline.schedules.in_flight` per chunk, plus the recomputed layer)."""
    g = config.grid
    states = bytes_per_parameter("mixed", "adam")
    schedule = config.schedule()
    out = []
    for r in range(g.p):
        mine = [parts[c * g.p + r] for c in range(config.interleave)]
        params = sum(c.parameters for c in mine)
        acts = _peak_stash(schedule[r], mine) + max(c.transient_bytes for c in mine)
        row = {"parameters": float(states.parameter * params),
               "gradients": float(states.gradient * params),
               "optimizer_state": float(states.optimizer * params),
               "activations": float(acts)}
        row["total"] = sum(row.values())
        out.append(row)
    return out


def _peak_stash(actions: Sequence[Action], mine: Sequence[Chunk]) -> float:
    """The most activation bytes a rank's schedule keeps at once."""
    if len({c.stash_bytes for c in mine}) == 1:
        return in_flight(actions) * mine[0].stash_bytes
    live, most = 0.0, 0.0
    for a in actions:
        live += mine[a.chunk].stash_bytes if a.kind == "F" else -mine[a.chunk].stash_bytes
        most = max(most, live)
    return most


def _check_cluster(config: MegatronConfig, cluster: Cluster) -> None:
    if cluster.world_size != config.grid.world_size:
        raise ValueError(f"the cluster has {cluster.world_size} GPUs but t·p·d = "
                         f"{config.grid.world_size}")


def _tensor_op_s(cluster: Cluster, config: MegatronConfig) -> dict[str, float]:
    """One tensor-group collective of each kind on ``b·s·h`` fp16 values, timed on the
    ``t`` GPUs of group 0 (all groups are alike), s."""
    t = config.grid.t
    if t == 1:
        return {"all_reduce": 0.0, "all_gather": 0.0, "reduce_scatter": 0.0}
    group = subcluster(cluster, config.grid.tensor_group(0))
    n = FP16 * config.micro_batch * config.model.seq * config.model.hidden
    return {"all_reduce": ring_phases_fast(group, n, FP16),
            "all_gather": ring_phases_fast(group, n, FP16, reduce_scatter=False),
            "reduce_scatter": ring_phases_fast(group, n, FP16, all_gather=False)}


def _embedding_all_reduce(cluster: Cluster, config: MegatronConfig, starts: tuple[float, float]
                          ) -> tuple[float, float]:
    """The word-embedding gradient all-reduce between the first and last stage (tensor rank 0,
    replica 0), each joining at its own time; returns when each is done, s."""
    g = config.grid
    pair = subcluster(cluster, [g.rank(0, 0, 0), g.rank(0, 0, g.p - 1)])
    nbytes = FP16 * config.model.vocab * config.model.hidden // g.t

    def program(comm: SimComm) -> SimGen:
        yield comm.env.timeout(starts[comm.rank])
        yield from _embedding_exchange(comm, nbytes)

    finish = run_spmd(pair, program, trace=False).finish_s
    return finish[0], finish[1]


def _embedding_exchange(pair: SimComm, nbytes: int) -> SimGen:
    """The embedding all-reduce on a group of two: a zero-byte handshake first (an NCCL
    collective starts once every member has joined it), then the ring."""
    other = 1 - pair.rank
    yield from sendrecv(pair, other, 0, other, 0, tag=1)
    yield from ring_all_reduce(pair, nbytes, FP16)


def _overlapped(ready_s: float, backward_s: float, buckets: int, all_reduce_s: float) -> float:
    """End of a gradient all-reduce split in ``buckets`` equal buckets, bucket ``i`` ready at
    ``ready + (i+1)·backward/buckets`` (one per layer as the last backward reaches it), the
    buckets' all-reduces one after another (one ring at a time, as DDP's)."""
    end = ready_s
    for i in range(buckets):
        end = max(end, ready_s + (i + 1) * backward_s / buckets) + all_reduce_s / buckets
    return end


def simulate_megatron(cluster: Cluster, config: MegatronConfig,
                      trace: bool = False) -> MegatronResult:
    """One iteration on ``cluster`` (``t·p·d`` GPUs), the fast path (module docstring)."""
    _check_cluster(config, cluster)
    g, m = config.grid, config.microbatches
    device = cluster.devices[0]
    flops_per_s = device.flops_per_s * config.matmul_efficiency
    parts = chunks(config, flops_per_s, device.mem_bandwidth_Bps)
    op_s = _tensor_op_s(cluster, config)

    def seconds(ops: Sequence[Op]) -> float:
        return math.fsum(v if kind == "compute" else op_s[kind] for kind, v in ops)

    profile = [LayerProfile(f"chunk{j}", seconds(c.forward), seconds(c.backward),
                            int(c.stash_bytes), c.parameters * FP16, c.output_bytes)
               for j, c in enumerate(parts)]
    pipe = subcluster(cluster, g.pipeline_group(0))
    result = simulate_pipeline(pipe, profile, [1] * config.chunks, m,
                               "interleaved" if config.interleave > 1 else "1f1b",
                               chunks=config.interleave, trace=trace or config.overlap_grad_reduce)
    finish = list(result.sim.finish_s)
    params = [sum(parts[c * g.p + r].parameters for c in range(config.interleave))
              for r in range(g.p)]
    dp_s, end = [0.0] * g.p, list(finish)
    for r in range(g.p):
        if g.d == 1:
            continue
        ring = subcluster(cluster, g.data_group(g.rank(0, 0, r)))
        full = ring_phases_fast(ring, FP16 * params[r], FP16)
        if config.overlap_grad_reduce:
            last = [s for s in result.trace.for_rank(r) if s.kind == "compute"][-1]
            layers = config.model.layers // g.p
            end[r] = max(finish[r], _overlapped(last.start, last.end - last.start, layers, full))
        else:
            end[r] = finish[r] + full
        dp_s[r] = end[r] - finish[r]
    emb = 0.0
    if g.p > 1:
        first, last_end = _embedding_all_reduce(cluster, config, (end[0], end[-1]))
        emb = max(first, last_end) - max(end[0], end[-1])
        end[0], end[-1] = first, last_end
    update = [update_seconds(n, device.mem_bandwidth_Bps) for n in params]
    done = [e + u for e, u in zip(end, update, strict=True)]
    return MegatronResult(
        config=config, cluster=cluster.name, iteration_time_s=max(done),
        pipeline_time_s=result.step_time_s, stage_finish_s=finish, data_parallel_s=dp_s,
        embedding_all_reduce_s=emb, update_s=update, bubble_fraction=result.bubble_fraction,
        tensor_all_reduce_s=op_s["all_reduce"], memory=memory_per_stage(config, parts),
        flops=iteration_flops(config.model, config.global_batch, config.recompute),
        model_flops=iteration_flops(config.model, config.global_batch, "none"),
        extra={"pipeline": result} if trace else {})


# ---- the reference: every GPU a process -----------------------------------------------------

def _run_ops(comm: SimComm, tp: SimComm | None, ops: Sequence[Op], name: str) -> SimGen:
    """Compute and tensor-group collectives in order; returns the seconds spent computing."""
    busy = 0.0
    for kind, value in ops:
        if kind == "compute":
            start = comm.now
            yield comm.env.timeout(value)
            comm.span("compute", name, start)
            busy += value
        elif tp is not None:
            program = {"all_reduce": ring_all_reduce, "all_gather": ring_all_gather,
                       "reduce_scatter": ring_reduce_scatter}[kind]
            yield from program(tp, int(value), FP16)
    return busy


def megatron_rank(comm: SimComm, config: MegatronConfig, parts: Sequence[Chunk],
                  update_s: Sequence[float]) -> SimGen:
    """Rank program of one iteration: the pipeline schedule with each chunk's ops (its tensor
    group's collectives included), then the data-parallel and embedding all-reduces and the
    optimizer step. Messages between stages as in
    :func:`simulator.pipeline.simulate.pipeline_stage`. Returns the seconds computing."""
    g = config.grid
    tp_rank, dp_rank, pp = g.coords(comm.rank)
    tp = comm.new_group(g.tensor_group(comm.rank)) if g.t > 1 else None
    pipe = comm.new_group(g.pipeline_group(comm.rank))
    dp = comm.new_group(g.data_group(comm.rank))
    assert pipe is not None and dp is not None
    p, k = g.p, len(parts)
    sends: list[SimWork] = []
    busy = 0.0
    for a in config.schedule()[pp]:
        j = a.chunk * p + pp
        c, i = parts[j], a.microbatch
        tag = 2 * (i * k + j)
        if a.kind == "F":
            if j > 0 and p > 1:
                yield from pipe.recv((j - 1) % p, c.input_bytes, tag)
            busy += yield from _run_ops(comm, tp, c.forward, f"F{i}")
            pipe.alloc(int(c.stash_bytes))
            if j < k - 1 and p > 1:
                sends.append(pipe.isend((j + 1) % p, c.output_bytes, 2 * (i * k + j + 1)))
        else:
            if j < k - 1 and p > 1:
                yield from pipe.recv((j + 1) % p, c.output_bytes, tag + 1)
            busy += yield from _run_ops(comm, tp, c.backward, f"B{i}")
            pipe.free(int(c.stash_bytes))
            if j > 0 and p > 1:
                sends.append(pipe.isend((j - 1) % p, c.input_bytes, 2 * (i * k + j - 1) + 1))
    for work in sends:
        yield work.wait()
    params = sum(parts[c * p + pp].parameters for c in range(config.interleave))
    if g.d > 1:
        yield from ring_all_reduce(dp, FP16 * params, FP16)
    if p > 1 and pp in (0, p - 1):
        pair = comm.new_group([g.rank(tp_rank, dp_rank, 0), g.rank(tp_rank, dp_rank, p - 1)])
        assert pair is not None
        yield from _embedding_exchange(pair, FP16 * config.model.vocab * config.model.hidden
                                       // g.t)
    yield comm.env.timeout(update_s[pp])
    return busy


def simulate_megatron_full(cluster: Cluster, config: MegatronConfig,
                           trace: bool = False) -> SimResult:
    """One iteration with a SimPy process per GPU (the reference the fast path is tested
    against; tens of GPUs): ``makespan_s`` is the iteration time, ``bytes_per_channel`` what
    crossed each link."""
    _check_cluster(config, cluster)
    if config.overlap_grad_reduce:
        raise ValueError("the full simulation does not overlap the gradient all-reduce")
    device = cluster.devices[0]
    parts = chunks(config, device.flops_per_s * config.matmul_efficiency,
                   device.mem_bandwidth_Bps)
    g = config.grid
    update = [update_seconds(sum(parts[c * g.p + r].parameters
                                 for c in range(config.interleave)), device.mem_bandwidth_Bps)
              for r in range(g.p)]
    return run_spmd(cluster, megatron_rank, config, parts, update, trace=trace)


def fits(config: MegatronConfig, flops_per_s: float, memory_bytes: float) -> bool:
    """Whether every GPU's model states and activations fit in ``memory_bytes``."""
    parts = chunks(config, flops_per_s)
    return max(m["total"] for m in memory_per_stage(config, parts)) <= memory_bytes


def with_grid(config: MegatronConfig, t: int, p: int, d: int, micro_batch: int
              ) -> MegatronConfig:
    """The same training with another grid and micro-batch."""
    return replace(config, grid=Grid(t, p, d), micro_batch=micro_batch)


# ---- gloo's all-gather, as this host waits for it ------------------------------------------

def waited_gloo_all_gather(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """Gloo's ring all-gather of ``nbytes`` in all (``nbytes / p`` from each rank), every
    received message a blocking wait of its own — the all-gather twin of
    :func:`simulator.ddp.waited_gloo_all_reduce`.

    Gloo (``gloo/allgather.cc``) cuts each rank's chunk in two halves and runs ``2·(p − 1)``
    iterations: in iteration ``i`` rank ``r`` sends half ``i mod 2`` of chunk ``r − ⌊i/2⌋`` to
    ``r + 1`` and receives the same half of chunk ``r − ⌊i/2⌋ − 1`` from ``r − 1``. So a
    two-rank all-gather is two messages each way, not one: on a host where the latency of a
    tiny message is a wake-up (``lab.tensor_parallel.ring_steps``), two waits.
    """
    p, r = comm.world_size, comm.rank
    if p == 1 or nbytes == 0:
        return
    chunk = -(-nbytes // p // itemsize) * itemsize
    halves = (chunk // itemsize // 2 * itemsize, chunk - chunk // itemsize // 2 * itemsize)
    left, right = (r - 1) % p, (r + 1) % p
    sends = []
    for i in range(2 * (p - 1)):
        size = halves[i % 2]
        recv = comm.irecv(left, size) if size else None
        if size:
            sends.append(comm.isend(right, size))
        if recv is not None:
            yield recv.wait()
    for send in sends:
        yield send.wait()

