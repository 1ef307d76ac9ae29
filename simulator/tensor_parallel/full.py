"""The reference, :func:`simulate_megatron_full`: one SimPy process per GPU, every message on
the cluster's network (tens of GPUs; the fast path is tested against it)."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.collectives.all_gather import ring_all_gather
from simulator.collectives.all_reduce import ring_all_reduce
from simulator.collectives.reduce_scatter import ring_reduce_scatter
from simulator.core.comm import SimComm, SimGen, SimResult, SimWork, run_spmd
from simulator.core.hardware import Cluster
from simulator.tensor_parallel.chunks import Chunk, Op, matmul_model, update_seconds
from simulator.tensor_parallel.config import MegatronConfig
from simulator.tensor_parallel.fast import _check_cluster, _embedding_exchange
from simulator.tensor_parallel.stages import chunks
from simulator.transformer import FP16


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
    if config.grid.cp > 1 or config.grid.ep > 1 or config.fsdp or \
            getattr(config.model, "experts", 0) > 0:
        raise ValueError("context, expert and fully sharded parallelism and MoE models are "
                         "simulated on the fast path only (simulate_megatron)")
    device = cluster.devices[0]
    flops_per_s, gemm = matmul_model(config, device)
    parts = chunks(config, flops_per_s, device.mem_bandwidth_Bps, gemm)
    g = config.grid
    update = [update_seconds(sum(parts[c * g.p + r].parameters
                                 for c in range(config.interleave)), device.mem_bandwidth_Bps)
              for r in range(g.p)]
    return run_spmd(cluster, megatron_rank, config, parts, update, trace=trace)
