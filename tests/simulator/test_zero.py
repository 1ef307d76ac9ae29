"""ZeRO's memory and traffic accounting equals the paper's formulas (Rajbhandari et al. 2020)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.all_gather import ring_all_gather_cost
from simulator.collectives.all_reduce import ring_all_reduce_cost
from simulator.collectives.reduce_scatter import ring_reduce_scatter_cost
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.zero import (
    UnitCost,
    communication_bytes,
    held_bytes,
    max_parameters,
    model_state_bytes,
    shard_elements,
    simulate_zero,
    simulate_zero_step,
    step_communication,
)

GB = 1e9


@pytest.mark.parametrize(("stage", "expected_gb"), [(0, 120), (1, 31.4), (2, 16.6), (3, 1.88)])
def test_paper_table_1_row(stage, expected_gb):
    # ZeRO paper, Table 1 / Figure 1: Ψ = 7.5B, N_d = 64, mixed-precision Adam (K = 12).
    got = model_state_bytes(7_500_000_000, stage, 64).total / GB
    assert got == pytest.approx(expected_gb, rel=0.01)


@given(psi=st.integers(1, 10**12).map(lambda k: 64 * k), nd=st.sampled_from([1, 2, 4, 8, 64]))
def test_mixed_adam_formulas(psi, nd):
    psi = psi * nd  # divisible by N_d: the paper's exact expressions
    assert model_state_bytes(psi, 0, nd).total == 16 * psi
    assert model_state_bytes(psi, 1, nd).total == 4 * psi + 12 * psi // nd
    assert model_state_bytes(psi, 2, nd).total == 2 * psi + 14 * psi // nd
    assert model_state_bytes(psi, 3, nd).total == 16 * psi // nd


@given(psi=st.integers(0, 10**6), nd=st.integers(1, 9), stage=st.sampled_from([0, 1, 2, 3]),
       precision=st.sampled_from(["mixed", "fp32"]),
       optimizer=st.sampled_from(["adam", "momentum", "sgd"]))
def test_shards_cover_the_model_and_stages_only_shrink(psi, nd, stage, precision, optimizer):
    per_device = model_state_bytes(psi, stage, nd, precision, optimizer)
    replicated = model_state_bytes(psi, 0, nd, precision, optimizer)
    assert per_device.total * nd >= replicated.total or stage == 0  # nothing is lost
    assert per_device.total <= replicated.total
    if stage < 3:
        assert per_device.total >= model_state_bytes(psi, stage + 1, nd, precision,
                                                     optimizer).total


def test_uneven_counts_use_the_largest_shard():
    # 10 parameters over 4 ranks: shards of 3, 3, 2, 2 (padded to 3 each); fp32 Adam.
    states = model_state_bytes(10, 3, 4, "fp32", "adam")
    assert (states.parameters, states.gradients, states.optimizer) == (12, 12, 24)


def test_fp32_adam_matches_what_torch_allocates():
    # fp32 parameters, fp32 gradients, Adam's exp_avg and exp_avg_sq: 4 + 4 + 8 bytes.
    assert model_state_bytes(1000, 0, 1, "fp32", "adam").as_dict() == {
        "parameters": 4000, "gradients": 4000, "optimizer": 8000, "total": 16000}


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_max_parameters_is_the_largest_that_fits(stage):
    memory = 32 * GB
    psi = max_parameters(memory, stage, 64)
    assert model_state_bytes(psi, stage, 64).total <= memory
    assert model_state_bytes(psi + 64, stage, 64).total > memory


def test_stage_3_sends_one_and_a_half_times_as_much():
    base = communication_bytes(10**9, 0, 8)
    assert base == pytest.approx(2 * 7 / 8 * 2 * 10**9)  # fp16 gradients, ring all-reduce
    assert communication_bytes(10**9, 1, 8) == pytest.approx(base)
    assert communication_bytes(10**9, 2, 8) == pytest.approx(base)
    assert communication_bytes(10**9, 3, 8) == pytest.approx(1.5 * base)


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("stage", [1, 3])
def test_step_time_on_an_ideal_network_equals_the_ring_closed_forms(p, stage):
    alpha, bandwidth, reduce_bps = 5e-6, 25e9, 1e12
    device = Device("d", 1e12, 3 * reduce_bps, 80 * GB, reduce_Bps=reduce_bps)
    cluster = Cluster.homogeneous("ideal", device, Topology.fully_connected(
        p, Link(alpha, bandwidth, "none")))
    psi = 3 * 2**20 * p  # chunks divide evenly
    rows = step_communication(cluster, psi, stage)
    for row in rows:
        cost = ring_all_gather_cost if row["kind"] == "all_gather" else ring_reduce_scatter_cost
        assert row["time_s"] == pytest.approx(cost(p, row["bytes"], alpha, 1 / bandwidth,
                                                   1 / reduce_bps), rel=1e-9)


def test_simulate_zero_checks_its_cluster():
    with pytest.raises(ValueError, match="dp is 4"):
        simulate_zero(1000, 1, 4, cluster=Cluster.homogeneous(
            "x", Device("d", 1e12, 1e12, GB), Topology.fully_connected(2, Link(1e-6, 1e9))))
    with pytest.raises(ValueError, match="stage must be"):
        model_state_bytes(10, 4, 2)
    with pytest.raises(ValueError, match="≥ 1"):
        model_state_bytes(10, 1, 0)


# ---- one training step (the twin of backends.zero) -------------------------------------------

UNITS = [UnitCost(1000, 1e-3, 2e-3, 4e-4), UnitCost(4097, 3e-3, 5e-3, 1e-3)]


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_step_without_contention_is_compute_plus_the_stages_collectives(p, stage):
    alpha, bandwidth, reduce_bps = 2e-5, 1e9, 5e9
    device = Device("d", 1e12, 3 * reduce_bps, 80 * GB, reduce_Bps=reduce_bps)
    cluster = Cluster.homogeneous("ideal", device, Topology.fully_connected(
        p, Link(alpha, bandwidth, "none")))
    costs = (alpha, 1 / bandwidth, 1 / reduce_bps)
    compute = sum(u.forward_s + u.backward_s for u in UNITS)
    update = sum(u.update_s * (1 if stage == 0 else shard_elements(u.numel, p) / u.numel)
                 for u in UNITS)
    comm = 0.0
    for u in UNITS:
        n = shard_elements(u.numel, p) * p * 4
        rs, ag = ring_reduce_scatter_cost(p, n, *costs), ring_all_gather_cost(p, n, *costs)
        comm += {0: ring_all_reduce_cost(p, n, *costs), 1: rs + ag, 2: rs + ag,
                 3: rs + 2 * ag}[stage] if p > 1 else 0.0
    got = simulate_zero_step(cluster, UNITS, stage).makespan_s
    assert got == pytest.approx(compute + update + comm, rel=1e-9)


def test_two_ranks_on_one_core_take_twice_the_compute():
    device = Device("d", 1e12, 1e12, 80 * GB)
    cluster = Cluster.homogeneous("x", device, Topology.fully_connected(2, Link(0.0, 1e15)))
    alone = simulate_zero_step(cluster, UNITS, 0, cores=2).makespan_s
    shared = simulate_zero_step(cluster, UNITS, 0, cores=1).makespan_s
    assert shared == pytest.approx(2 * alone, rel=1e-3)


def test_an_update_measured_together_does_not_share_the_cores_again():
    device = Device("d", 1e12, 1e12, 80 * GB)
    cluster = Cluster.homogeneous("x", device, Topology.fully_connected(2, Link(0.0, 1e15)))
    units = [UnitCost(1000, 0.0, 0.0, 1e-2)]
    pooled = simulate_zero_step(cluster, units, 0, cores=1).makespan_s
    together = simulate_zero_step(cluster, units, 0, cores=1,
                                  update_measured_together=True).makespan_s
    assert pooled == pytest.approx(2e-2, rel=1e-6)  # two ranks' updates on one core
    assert together == pytest.approx(1e-2, rel=1e-6)  # already measured side by side


# ---- the peak memory of one step -----------------------------------------------------------

def _free_cluster(p):
    device = Device("d", 1e12, 1e12, 80 * GB)
    return Cluster.homogeneous("x", device, Topology.fully_connected(p, Link(0.0, 1e15)))


@pytest.mark.parametrize("p", [1, 2, 4])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_held_bytes_are_the_textbook_model_states_plus_the_stages_gradient_buffer(p, stage):
    units = [UnitCost(400, 0, 0, 0), UnitCost(1200, 0, 0, 0)]  # both divide by p
    states = model_state_bytes(1600, stage, p, "fp32", "adam").total  # (4 + 4 + 8)Ψ, sharded
    assert held_bytes(units, stage, p) == states + (4 * 1200 if stage >= 2 else 0)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_without_activations_the_peak_is_the_held_states_and_the_larger_transient(stage):
    p, units = 2, [UnitCost(1000, 1e-3, 2e-3, 4e-4), UnitCost(4098, 3e-3, 5e-3, 1e-3)]
    peak = max(simulate_zero_step(_free_cluster(p), units, stage).peak_memory_bytes)
    big = 4 * 4098
    adam = 2 * (big if stage == 0 else big // p)  # Adam's √v and ÷ of the largest tensor
    backward = big + (big if stage == 3 else 0)  # fresh gradients (+ the gathered unit)
    assert peak == held_bytes(units, stage, p) + max(adam, backward)


def test_activations_count_until_their_backward_and_every_rank_peaks_alike():
    p = 2
    units = [UnitCost(10, 0, 0, 0, output_bytes=1000), UnitCost(10, 0, 0, 0, output_bytes=300)]
    peaks = simulate_zero_step(_free_cluster(p), units, 1).peak_memory_bytes
    # backward of the last unit: both activations, the loss's gradient, the gradient of its
    # input and its fresh parameter gradients
    assert peaks == [held_bytes(units, 1, p) + 1000 + 300 + 300 + 1000 + 40] * p


@pytest.mark.parametrize("p", [2, 4])
def test_no_stage_peaks_above_the_one_before(p):
    units = [UnitCost(262_656, 0, 0, 0, 65_536), UnitCost(262_656, 0, 0, 0, 65_536)]
    peaks = [max(simulate_zero_step(_free_cluster(p), units, s).peak_memory_bytes)
             for s in (0, 1, 2, 3)]
    # not always lower: with two units on two ranks, stage 2's gradient buffer (one unit)
    # and stage 3's gathered unit cost what their sharding saves
    assert peaks == sorted(peaks, reverse=True) and peaks[1] < peaks[0]
    assert (peaks[3] < peaks[1]) is (p > 2)
