"""The fast path, :func:`simulate_megatron`: one tensor group's collectives, one pipeline and
one data-parallel ring per stage, each simulated once on a
:func:`~simulator.tensor_parallel.subcluster.subcluster` — exact on clusters where groups never
share a channel (the package docstring, :mod:`simulator.tensor_parallel`, says why)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from simulator.collectives.all_reduce import ring_all_reduce, ring_phases_fast
from simulator.collectives.all_to_all import pairwise_all_to_all
from simulator.collectives.exchange import sendrecv
from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.core.hardware import Cluster
from simulator.moe_model import iteration_flops
from simulator.pipeline import LayerProfile, simulate_pipeline
from simulator.tensor_parallel.chunks import Op, matmul_model, update_seconds
from simulator.tensor_parallel.config import MegatronConfig
from simulator.tensor_parallel.memory import memory_per_stage, stored_parameters
from simulator.tensor_parallel.result import MegatronResult
from simulator.tensor_parallel.stages import chunks
from simulator.tensor_parallel.subcluster import subcluster
from simulator.transformer import FP16


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


def _group_op_s(cluster: Cluster, config: MegatronConfig, kind: str, nbytes: float) -> float:
    """A context ring pass (``cp − 1`` sendrecv steps of ``nbytes``) or an expert-group
    pairwise all-to-all of ``nbytes`` per rank, simulated on the group of rank 0, s."""
    g = config.grid
    ranks = g.context_group(0) if kind == "cp_ring" else g.expert_group(0)
    size = len(ranks)

    def program(comm: SimComm) -> SimGen:
        if kind == "all_to_all":
            yield from pairwise_all_to_all(comm, int(nbytes), FP16)
            return
        for _ in range(size - 1):
            yield from sendrecv(comm, (comm.rank + 1) % size, int(nbytes),
                                (comm.rank - 1) % size, int(nbytes))

    return run_spmd(subcluster(cluster, ranks), program, trace=False).makespan_s


def _gradient_sync_s(cluster: Cluster, config: MegatronConfig, stage: int, params: float,
                     experts: float) -> float:
    """A stage's gradient synchronisation, s: the dense gradients ring-all-reduced over the
    ``d·cp`` ranks that share them, the experts' over the ``d·cp/ep`` that share those. With
    ``fsdp`` each costs ``3/2`` of the all-reduce: ZeRO-3's parameter all-gathers in forward
    and backward and the gradient reduce-scatter, ``3Ψ`` instead of ``2Ψ`` (Rajbhandari et
    al. 2020, §7.2.2), counted exposed."""
    g = config.grid
    first = g.rank(0, 0, stage)
    total = 0.0
    for ranks, n in ((g.data_context_group(first), params - experts),
                     (g.expert_data_group(first), experts)):
        if len(ranks) > 1 and n > 0:
            total += ring_phases_fast(subcluster(cluster, ranks), FP16 * int(n), FP16)
    return 1.5 * total if config.fsdp else total


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
    flops_per_s, gemm = matmul_model(config, device)
    parts = chunks(config, flops_per_s, device.mem_bandwidth_Bps, gemm)
    op_s = _tensor_op_s(cluster, config)
    group_s: dict[tuple[str, float], float] = {}

    def op_seconds(kind: str, v: float) -> float:
        if kind == "compute":
            return v
        if kind in op_s:
            return op_s[kind]
        if (kind, v) not in group_s:
            group_s[kind, v] = _group_op_s(cluster, config, kind, v)
        return group_s[kind, v]

    def seconds(ops: Sequence[Op]) -> float:
        return math.fsum(op_seconds(kind, v) for kind, v in ops)

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
        if g.cp > 1 or g.ep > 1 or config.fsdp:
            mine = [parts[c * g.p + r] for c in range(config.interleave)]
            end[r] = finish[r] + _gradient_sync_s(cluster, config, r, params[r],
                                                  sum(c.expert_parameters for c in mine))
            dp_s[r] = end[r] - finish[r]
            continue
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
    stored = [stored_parameters(config, [parts[c * g.p + r] for c in range(config.interleave)])
              for r in range(g.p)]
    update = [update_seconds(int(n), device.mem_bandwidth_Bps) for n in stored]
    done = [e + u for e, u in zip(end, update, strict=True)]
    return MegatronResult(
        config=config, cluster=cluster.name, iteration_time_s=max(done),
        pipeline_time_s=result.step_time_s, stage_finish_s=finish, data_parallel_s=dp_s,
        embedding_all_reduce_s=emb, update_s=update, bubble_fraction=result.bubble_fraction,
        tensor_all_reduce_s=op_s["all_reduce"], memory=memory_per_stage(config, parts),
        flops=iteration_flops(config.model, config.global_batch, config.recompute),
        model_flops=iteration_flops(config.model, config.global_batch, "none"),
        extra={"pipeline": result} if trace else {})
