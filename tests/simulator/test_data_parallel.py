"""DataParallel, simulated: closed form, first-device bottleneck, comparison with DDP."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology
from simulator.data_parallel import (
    PCIE4,
    PHASES,
    FlopProfile,
    TableProfile,
    Workload,
    best_replica_count,
    chunk_sizes,
    data_parallel_phases,
    data_parallel_step_cost,
    ddp_step_cost,
    pcie_cluster,
    simulate_data_parallel,
    threads_cluster,
)

WIDTHS = (256, 1024, 1024, 10)
GPU = Device("gpu", 50e12, 1e12, 1e11)


def closed_form(cluster, link, workload, profile, **kw):
    dev = cluster.devices[0]
    return data_parallel_phases(cluster.world_size, workload, profile, link.latency_s,
                                1 / link.bandwidth_Bps, dev.gamma_s_per_B, 1 / dev.memcpy_Bps,
                                **kw)


@given(n=st.integers(1, 500), parts=st.integers(1, 12))
def test_chunk_sizes_follow_torch_chunk(n, parts):
    torch = pytest.importorskip("torch")
    assert chunk_sizes(n, parts) == [len(c) for c in torch.arange(n).chunk(parts)]


def test_a_batch_of_five_on_four_devices_uses_three():
    assert chunk_sizes(5, 4) == [2, 2, 1]


@pytest.mark.parametrize("copies", ["serial", "concurrent"])
@pytest.mark.parametrize("backward", ["parallel", "serial"])
@given(p=st.integers(1, 6), batch=st.integers(1, 97), cores=st.sampled_from([None, 1, 2]),
       first_sum_Bps=st.sampled_from([None, 3e9]))
def test_simulation_equals_closed_form_without_contention(copies, backward, p, batch, cores,
                                                          first_sum_Bps):
    link = Link(3e-6, 20e9, "none")
    cluster = Cluster.homogeneous("sw", GPU, Topology.switch(p, link))
    workload = Workload.for_mlp(WIDTHS, batch)
    profile = FlopProfile.for_mlp(WIDTHS, GPU)
    result = simulate_data_parallel(cluster, workload, profile, copies, backward, cores,
                                    first_sum_Bps)
    expected = closed_form(cluster, link, workload, profile, copies=copies,
                           backward=backward, cores=cores,
                           first_sum_s_per_B=first_sum_Bps and 1 / first_sum_Bps)
    phases = result.returns[0]
    assert list(phases) == list(PHASES)
    for name in PHASES:
        assert phases[name] == pytest.approx(expected[name], rel=1e-9, abs=1e-15), name
    assert result.makespan_s == pytest.approx(sum(expected.values()), rel=1e-9)


def test_every_replicated_and_reduced_byte_crosses_the_first_devices_port():
    p, workload = 4, Workload.for_mlp(WIDTHS, 64)
    result = simulate_data_parallel(pcie_cluster(p), workload, FlopProfile.for_mlp(WIDTHS, GPU))
    out_of_0 = result.bytes_per_channel[(0, "sw")]
    into_0 = result.bytes_per_channel[("sw", 0)]
    sizes = chunk_sizes(64, p)
    assert out_of_0 == (p - 1) * workload.param_bytes + sum(
        c * (workload.input_bytes_per_sample + workload.output_bytes_per_sample)
        for c in sizes[1:])
    assert into_0 == (p - 1) * workload.param_bytes + sum(
        c * workload.output_bytes_per_sample for c in sizes[1:])
    assert result.bytes_per_channel[(1, "sw")] == workload.param_bytes + (
        sizes[1] * workload.output_bytes_per_sample)


def test_concurrent_copies_share_the_first_devices_port_under_fair_contention():
    p, workload = 8, Workload.for_mlp(WIDTHS, 256)
    profile = FlopProfile.for_mlp(WIDTHS, GPU)
    none = simulate_data_parallel(pcie_cluster(p).with_contention("none"), workload, profile,
                                  "concurrent").returns[0]
    fair = simulate_data_parallel(pcie_cluster(p), workload, profile, "concurrent").returns[0]
    # without contention the 7 copies overlap; sharing the port they take 7 times as long
    assert fair["replicate"] == pytest.approx(
        PCIE4.latency_s + (p - 1) * workload.param_bytes / PCIE4.bandwidth_Bps, rel=1e-6)
    assert none["replicate"] == pytest.approx(PCIE4.time(workload.param_bytes), rel=1e-9)


def test_replication_cost_grows_with_replicas_while_compute_shrinks():
    workload = Workload.for_mlp(WIDTHS, 1024)
    profile = FlopProfile.for_mlp(WIDTHS, GPU)
    phases = [simulate_data_parallel(pcie_cluster(p), workload, profile).returns[0]
              for p in (2, 4, 8)]
    assert phases[0]["replicate"] < phases[1]["replicate"] < phases[2]["replicate"]
    assert phases[0]["apply"] > phases[1]["apply"] > phases[2]["apply"]


def test_ddp_beats_data_parallel_once_the_replicas_outnumber_two():
    link, workload = PCIE4, Workload.for_mlp(WIDTHS, 1024)
    profile = FlopProfile.for_mlp(WIDTHS, GPU)
    for p in (4, 8):
        dp = data_parallel_step_cost(p, workload, profile, link.latency_s,
                                     1 / link.bandwidth_Bps, GPU.gamma_s_per_B,
                                     1 / GPU.memcpy_Bps)
        ddp = ddp_step_cost(p, workload, profile, link.latency_s, 1 / link.bandwidth_Bps,
                            GPU.gamma_s_per_B)
        assert ddp < dp


def test_best_replica_count_is_the_argmin_of_the_simulation():
    workload = Workload.for_mlp(WIDTHS, 4096)
    slow = Device("slow-gpu", 2e12, 1e12, 1e11)
    profile = FlopProfile.for_mlp(WIDTHS, slow)
    times = {p: simulate_data_parallel(pcie_cluster(p, slow).with_contention("none"),
                                       workload, profile).makespan_s for p in range(1, 13)}
    best = best_replica_count(12, workload, profile, PCIE4.latency_s, 1 / PCIE4.bandwidth_Bps,
                              slow.gamma_s_per_B, 1 / slow.memcpy_Bps)
    assert best == min(times, key=times.get)
    assert 1 < best < 12  # a real interior optimum: compute saved vs copies paid


def test_threads_cluster_runs_serial_backward_on_one_thread():
    profile = TableProfile((1, 8), (1e-4, 8e-4), (2e-4, 16e-4), (1e-5, 1e-5), 5e-5)
    workload = Workload(8, 64, 40, 4096)
    result = simulate_data_parallel(threads_cluster(4, 1e9, 1e9), workload, profile,
                                    backward="serial", cores=2)
    phases = result.returns[0]
    assert phases["apply"] == pytest.approx(2 * profile.forward_s(2))  # 4 threads, 2 cores
    backward_spans = [s for s in result.trace if s.name.startswith("backward")]
    assert {s.rank for s in backward_spans} == {0} and len(backward_spans) == 4


def test_table_profile_interpolates_and_rejects_ragged_tables():
    profile = TableProfile((2, 4), (1.0, 3.0), (2.0, 6.0), (0.0, 0.0), 0.5)
    assert profile.forward_s(3) == pytest.approx(2.0)
    assert profile.backward_s(8) == pytest.approx(14.0)  # extrapolated from the last two
    with pytest.raises(ValueError):
        TableProfile((2, 4), (1.0,), (2.0, 6.0), (0.0, 0.0), 0.5)


def test_simulation_is_deterministic():
    workload = Workload.for_mlp(WIDTHS, 100)
    profile = FlopProfile.for_mlp(WIDTHS, GPU)
    a = simulate_data_parallel(pcie_cluster(3), workload, profile, "concurrent")
    b = simulate_data_parallel(pcie_cluster(3), workload, profile, "concurrent")
    assert a.makespan_s == b.makespan_s and a.trace.to_records() == b.trace.to_records()
