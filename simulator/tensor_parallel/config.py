"""A Megatron training configuration: the ``t × cp × d × p`` :class:`Grid` in Megatron's rank order
(Narayanan et al., SC 2021, §3; Megatron-Core's ``initialize_model_parallel``, order
``tp-cp-ep-dp-pp``) and the
:class:`MegatronConfig` that trains a GPT on it (batch, micro-batch, recomputation, sequence
parallelism, interleaving)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.pipeline.schedules import Schedule, interleaved_1f1b, one_f_one_b
from simulator.transformer import GPT, RECOMPUTE_MODES, Recompute


@dataclass(frozen=True)
class Grid:
    """``t × cp × d × p`` GPUs in Megatron-Core's order: ``rank = pp·t·cp·d + dp·t·cp + c·t +
    tp``; ``cp = 1`` is Megatron-LM's ``pp·t·d + dp·t + tp``.

    ``cp`` splits each sequence over ranks (context parallelism, ring attention); ``ep``
    shards the experts. Expert parallelism is *folded* into data × context parallelism, as
    Megatron-Core does with the expert tensor size equal to ``t``: ``ep`` must divide
    ``d·cp``, and the ``d·cp`` ranks of a data-context group form ``d·cp/ep`` expert groups of
    ``ep`` consecutive members (Liu et al., "MoE Parallel Folding", 2025). GPUs: ``t·p·d·cp``.
    """

    t: int
    p: int
    d: int
    cp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("t", "p", "d", "cp", "ep"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if (self.d * self.cp) % self.ep:
            raise ValueError(f"ep = {self.ep} does not divide d·cp = {self.d * self.cp}")

    @property
    def world_size(self) -> int:
        """``t·p·d·cp`` GPUs."""
        return self.t * self.p * self.d * self.cp

    def rank(self, tp: int, dp: int, pp: int, c: int = 0) -> int:
        """The global rank at grid coordinates (tensor, data, pipeline, context)."""
        return pp * self.t * self.cp * self.d + dp * self.t * self.cp + c * self.t + tp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """``(tp, dp, pp)`` of a global rank (its context coordinate: :meth:`context`)."""
        tc = self.t * self.cp
        return rank % self.t, rank // tc % self.d, rank // (tc * self.d)

    def context(self, rank: int) -> int:
        """A rank's context-parallel coordinate."""
        return rank // self.t % self.cp

    def tensor_group(self, rank: int) -> list[int]:
        """The ``t`` ranks that split this rank's layers."""
        _, dp, pp = self.coords(rank)
        return [self.rank(i, dp, pp, self.context(rank)) for i in range(self.t)]

    def data_group(self, rank: int) -> list[int]:
        """The ``d`` replicas of this rank's shard, which all-reduce its gradients."""
        tp, _, pp = self.coords(rank)
        return [self.rank(tp, i, pp, self.context(rank)) for i in range(self.d)]

    def context_group(self, rank: int) -> list[int]:
        """The ``cp`` ranks that split this rank's sequences (a ring)."""
        tp, dp, pp = self.coords(rank)
        return [self.rank(tp, dp, pp, c) for c in range(self.cp)]

    def data_context_group(self, rank: int) -> list[int]:
        """The ``d·cp`` ranks that hold the same dense weights (gradients reduced over them)."""
        tp, _, pp = self.coords(rank)
        return [self.rank(tp, i, pp, c) for i in range(self.d) for c in range(self.cp)]

    def expert_group(self, rank: int) -> list[int]:
        """The ``ep`` ranks that share out the experts (all-to-alls among them)."""
        group = self.data_context_group(rank)
        first = group.index(rank) // self.ep * self.ep
        return group[first:first + self.ep]

    def expert_data_group(self, rank: int) -> list[int]:
        """The ``d·cp/ep`` ranks that hold the same experts."""
        group = self.data_context_group(rank)
        return group[group.index(rank) % self.ep::self.ep]

    def pipeline_group(self, rank: int) -> list[int]:
        """The ``p`` stages this rank's micro-batches flow through."""
        tp, dp, _ = self.coords(rank)
        return [self.rank(tp, dp, i, self.context(rank)) for i in range(self.p)]

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
        matmul_efficiency: ``None`` (default): the matrix multiplications priced by shape on
            the device's GEMM model (:func:`~simulator.tensor_parallel.chunks.matmul_model`);
            a number in (0, 1]: instead, every GEMM at that fraction of the device's peak
            FLOP/s (a teaching override; 1.0 is the data sheet's peak).
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
    matmul_efficiency: float | None = None
    fsdp: bool = False

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
        experts = getattr(model, "experts", 0)
        if g.ep > 1 and not experts:
            raise ValueError(f"ep = {g.ep} needs a model with experts")
        if g.ep > 1 and experts % g.ep:
            raise ValueError(f"{experts} experts do not shard over ep = {g.ep}")
        if model.seq % g.cp:
            raise ValueError(f"sequence length {model.seq} does not split over cp = {g.cp}")
        if self.matmul_efficiency is not None and not 0 < self.matmul_efficiency <= 1:
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



def with_grid(config: MegatronConfig, t: int, p: int, d: int, micro_batch: int,
              cp: int = 1, ep: int = 1) -> MegatronConfig:
    """The same training with another grid and micro-batch."""
    return replace(config, grid=Grid(t, p, d, cp, ep), micro_batch=micro_batch)
