"""Megatron's 3D parallelism simulated: the grid, the fast path against a process per GPU,
bytes, memory, and the planner."""

import pytest

from simulator.core.hardware import Cluster, preset
from simulator.megatron_plan import configurations, plan
from simulator.pipeline.schedules import bubble_fraction
from simulator.tensor_parallel import (
    Grid,
    MegatronConfig,
    chunks,
    matmul_model,
    memory_per_stage,
    simulate_megatron,
    simulate_megatron_full,
    subcluster,
    update_seconds,
)
from simulator.transformer import GPT, activation_bytes_per_layer, layer_parameters, parameters
from simulator.transformer import preset as model_preset

SMALL = GPT(8, 256, 8, 128, 1000, "small")


def test_grid_groups_are_megatrons():
    # Megatron-LM's initialize_model_parallel docstring: 16 GPUs, t = 2, p = 4 (so d = 2)
    g = Grid(2, 4, 2)
    assert [g.tensor_group(r) for r in (0, 2, 14)] == [[0, 1], [2, 3], [14, 15]]
    assert [g.pipeline_group(r) for r in (0, 3)] == [[0, 4, 8, 12], [3, 7, 11, 15]]
    assert [g.data_group(r) for r in (0, 1, 4)] == [[0, 2], [1, 3], [4, 6]]
    assert all(g.rank(*g.coords(r)) == r for r in range(g.world_size))
    assert g.draw(8).splitlines()[0].startswith("node 0: 0:t0d0p0 1:t1d0p0 2:t0d1p0")


# (t, p, d, GPUs per node, interleave, sequence parallel, recompute, micro-batch): every
# pipeline hop between nodes, so no two groups share a channel
EXACT = [
    (2, 2, 2, 4, 1, False, "full", 1),
    (2, 2, 4, 4, 1, False, "none", 2),   # data-parallel rings cross nodes too
    (2, 2, 2, 4, 2, True, "selective", 1),
    (1, 4, 2, 2, 1, False, "full", 1),
    (4, 1, 2, 4, 1, False, "full", 1),   # no pipeline
    (2, 4, 1, 2, 2, False, "full", 1),   # interleaved, no data parallelism
    (1, 1, 3, 1, 1, False, "none", 1),   # data parallelism alone, odd d
]


@pytest.mark.parametrize(("t", "p", "d", "gpn", "v", "sp", "rc", "b"), EXACT)
def test_fast_path_equals_a_process_per_gpu(t, p, d, gpn, v, sp, rc, b):
    cluster = Cluster.dgx(t * p * d, gpus_per_node=gpn)
    config = MegatronConfig(SMALL, Grid(t, p, d), 8 * d * b, b, recompute=rc,
                            sequence_parallel=sp, interleave=v)
    fast = simulate_megatron(cluster, config).iteration_time_s
    full = simulate_megatron_full(cluster, config).makespan_s
    assert fast == pytest.approx(full, rel=1e-9)


def test_fast_path_ignores_only_nvlink_sharing_when_stages_share_a_node():
    cluster = Cluster.dgx(8)  # t = 2, p = 2, d = 2: both stages in one node
    config = MegatronConfig(SMALL, Grid(2, 2, 2), 16, 1)
    fast = simulate_megatron(cluster, config).iteration_time_s
    full = simulate_megatron_full(cluster, config).makespan_s
    assert fast <= full
    assert fast == pytest.approx(full, rel=0.01)


def test_tensor_parallel_bytes_on_the_wire_are_8bsh_t_minus_1_over_t_per_layer():
    t, m, b = 4, 3, 2
    config = MegatronConfig(SMALL, Grid(t, 1, 1), m * b, b, recompute="none")
    sim = simulate_megatron_full(Cluster.dgx(t), config)
    sent = sim.bytes_per_channel[(0, "node0")]
    bsh = b * SMALL.seq * SMALL.hidden
    per_layer = 8 * bsh * (t - 1) / t  # elements
    embedding_and_head = 2 * (2 * bsh * (t - 1) / t)  # one all-reduce each
    assert sent == pytest.approx(2 * m * (SMALL.layers * per_layer + embedding_and_head))


def test_without_pipeline_or_data_parallelism_the_iteration_is_m_times_the_layers():
    config = MegatronConfig(SMALL, Grid(1, 1, 1), 4, 1, recompute="none")
    cluster = Cluster.dgx(1)
    flops, gemm = matmul_model(config, cluster.devices[0])  # the A100's GEMM model
    hbm = cluster.devices[0].mem_bandwidth_Bps
    (chunk,) = chunks(config, flops, hbm, gemm)
    work = sum(v for _, v in chunk.forward) + sum(v for _, v in chunk.backward)
    update = update_seconds(parameters(SMALL), hbm)
    got = simulate_megatron(cluster, config)
    assert got.iteration_time_s == pytest.approx(4 * work + update)
    # without the elementwise kernels: the model's FLOPs at the device's peak
    (matmuls,) = chunks(config, flops)
    work = sum(v for _, v in matmuls.forward) + sum(v for _, v in matmuls.backward)
    assert 4 * work * flops == pytest.approx(got.model_flops)
    assert got.iteration_time_s > 4 * work + update


def test_bubble_matches_the_schedule_formula_when_communication_is_free():
    g = Grid(1, 4, 1)
    cluster = Cluster.dgx(4).with_contention("none")  # stages on NVLink
    big = GPT(8, 4096, 32, 2048, 1000)  # compute-bound: sends take ~1 % of a stage
    config = MegatronConfig(big, g, 16, 1, recompute="none")
    got = simulate_megatron(cluster, config).bubble_fraction
    assert got == pytest.approx(bubble_fraction(4, 16), abs=0.02)


def test_overlapping_the_gradient_all_reduce_never_hurts():
    cluster = Cluster.dgx(16, gpus_per_node=4)
    base = MegatronConfig(SMALL, Grid(2, 2, 4), 32, 1)
    plain = simulate_megatron(cluster, base)
    over = simulate_megatron(cluster, MegatronConfig(SMALL, Grid(2, 2, 4), 32, 1,
                                                     overlap_grad_reduce=True))
    assert over.iteration_time_s <= plain.iteration_time_s
    assert over.iteration_time_s >= max(plain.stage_finish_s)
    assert max(over.data_parallel_s) < max(plain.data_parallel_s)


def test_memory_per_gpu_gpt3_on_t8_p16():
    m = model_preset("gpt3-175b")
    config = MegatronConfig(m, Grid(8, 16, 8), 1536, 1)
    parts = chunks(config, 312e12)
    mem = memory_per_stage(config, parts)
    middle = mem[5]
    params = 6 * layer_parameters(m) // 8
    assert middle["parameters"] == 2 * params
    assert middle["optimizer_state"] == 12 * params
    # 1F1B: stage r keeps p − r micro-batches of its 6 layers' inputs (full recomputation),
    # plus one layer's activations while its backward recomputes them
    kept = (16 - 5) * 6 * activation_bytes_per_layer(m, 1, 8, recompute="full")
    assert middle["activations"] == pytest.approx(
        kept + activation_bytes_per_layer(m, 1, 8) - activation_bytes_per_layer(
            m, 1, 8, recompute="full"))
    assert mem[0]["activations"] > mem[-1]["activations"] > 0


def test_interleaving_shrinks_the_bubble_and_costs_activation_memory():
    cluster = preset("a100", 32)
    m = model_preset("gpt-7.5b")
    plain = simulate_megatron(cluster, MegatronConfig(m, Grid(4, 4, 2), 32, 1))
    inter = simulate_megatron(cluster, MegatronConfig(m, Grid(4, 4, 2), 32, 1, interleave=3))
    assert inter.bubble_fraction < plain.bubble_fraction
    assert inter.memory[0]["activations"] > plain.memory[0]["activations"]


def test_deterministic():
    cluster = preset("a100", 64)
    config = MegatronConfig(model_preset("gpt-7.5b"), Grid(4, 4, 4), 64, 2)
    assert simulate_megatron(cluster, config).as_dict() == \
        simulate_megatron(cluster, config).as_dict()


def test_subcluster_keeps_the_real_links():
    full = preset("a100", 32)
    sub = subcluster(full, [0, 8, 16, 24])  # one GPU per node: every hop over InfiniBand
    assert sub.topology.path_bandwidth_Bps(0, 1) == full.topology.path_bandwidth_Bps(0, 8)
    inside = subcluster(full, [0, 1])
    assert inside.topology.path_bandwidth_Bps(0, 1) == full.topology.path_bandwidth_Bps(0, 1)
    with pytest.raises(ValueError, match="twice"):
        subcluster(full, [0, 0])


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(grid=Grid(3, 1, 1)), "heads"),
    (dict(grid=Grid(1, 3, 1)), "layers"),
    (dict(global_batch=7), "global batch"),
    (dict(interleave=2), "interleaving"),
    (dict(recompute="half"), "recompute"),
    (dict(matmul_efficiency=0), "efficiency"),
])
def test_bad_configurations_raise(kwargs, match):
    base = dict(model=SMALL, grid=Grid(1, 1, 2), global_batch=8, micro_batch=1)
    with pytest.raises(ValueError, match=match):
        MegatronConfig(**(base | kwargs))


def test_cluster_size_must_match_the_grid():
    with pytest.raises(ValueError, match="t·p·d"):
        simulate_megatron(preset("a100", 16), MegatronConfig(SMALL, Grid(1, 1, 8), 8, 1))


def test_plan_ranks_by_throughput_and_skips_what_does_not_fit():
    m = model_preset("gpt-7.5b")
    cluster = preset("a100", 32)
    rows = plan(m, cluster, 64)
    fitting = [r for r in rows if r.fits]
    skipped = [r for r in rows if not r.fits]
    memory = cluster.devices[0].memory_bytes
    assert fitting and skipped
    assert all(r.memory_per_gpu_bytes <= memory for r in fitting)
    assert all(r.memory_per_gpu_bytes > memory for r in skipped)
    # 7.5B parameters × 16 bytes do not fit one 80 GB GPU: no t = p = 1 configuration fits
    assert all((r.t, r.p) != (1, 1) for r in fitting)
    assert any((r.t, r.p) == (1, 1) for r in skipped)
    speeds = [r.samples_per_s for r in fitting]
    assert speeds == sorted(speeds, reverse=True)
    best = fitting[0]
    again = simulate_megatron(cluster, MegatronConfig(m, Grid(best.t, best.p, best.d), 64,
                                                      best.micro_batch))
    assert again.iteration_time_s == best.iteration_time_s


def test_configurations_are_all_valid_and_complete():
    got = list(configurations(SMALL, 16, 32))
    assert all(c.grid.world_size == 16 for c in got)
    shapes = {(c.grid.t, c.grid.p, c.micro_batch) for c in got}
    assert (2, 2, 1) in shapes and (8, 1, 2) in shapes and (1, 8, 2) in shapes
    assert (16, 1, 1) not in shapes  # t ≤ 8: inside a node


def test_a_traced_run_keeps_the_pipeline_timeline_out_of_its_document():
    import json

    cluster = Cluster.dgx(8, gpus_per_node=2)
    result = simulate_megatron(cluster, MegatronConfig(SMALL, Grid(2, 4, 1), 8, 1), trace=True)
    assert len(result.extra["pipeline"].trace) > 0
    json.dumps(result.as_dict())


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_gloo_all_gather_waits_for_two_half_chunks_per_step(p):
    import math

    from simulator.core.comm import run_spmd
    from simulator.core.hardware import Device
    from simulator.core.network import Link, Topology
    from simulator.tensor_parallel import waited_gloo_all_gather

    alpha = 1e-4
    cpu = Device("cpu", 1e11, 1e10, math.inf, reduce_Bps=math.inf, memcpy_Bps=math.inf)
    cluster = Cluster.homogeneous("a", cpu, Topology.fully_connected(p, Link(alpha, 1e18)))
    took = run_spmd(cluster, waited_gloo_all_gather, 16384, trace=False).makespan_s
    # gloo/allgather.cc: 2·(p − 1) messages in, each a wait of its own
    assert took == pytest.approx(2 * (p - 1) * alpha, rel=1e-6)
