"""One simulated Megatron iteration's numbers (:class:`MegatronResult`): times in seconds,
memory in bytes, throughput in TFLOP/s per GPU."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simulator.moe_model import parameters
from simulator.tensor_parallel.config import MegatronConfig


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
        """``t·p·d·cp``."""
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
            "params": parameters(c.model),
            "active_params": parameters(c.model, active=True), "tp": g.t, "cp": g.cp, "ep": g.ep,
            "fsdp": c.fsdp, "pp": g.p, "dp": g.d, "gpus": g.world_size,
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
