"""Balancing by time and by size, and PipeDream's planner, against brute force."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.all_reduce import ring_all_reduce_cost
from simulator.pipeline.balance import (
    balance_by_size,
    balance_by_time,
    balance_cost,
    stage_sums,
)
from simulator.pipeline.planner import plan_pipedream, plan_time, stage_time
from simulator.pipeline.profile import LayerProfile, uniform_profile


def compositions(n, k):
    """Every way to cut n layers into k contiguous non-empty stages."""
    for cuts in itertools.combinations(range(1, n), k - 1):
        edges = (0, *cuts, n)
        yield [b - a for a, b in itertools.pairwise(edges)]


@given(costs=st.lists(st.floats(0, 10), min_size=1, max_size=8), data=st.data())
def test_balance_minimises_the_slowest_stage_like_brute_force(costs, data):
    k = data.draw(st.integers(1, len(costs)))
    balance = balance_cost(costs, k)
    assert len(balance) == k and sum(balance) == len(costs) and min(balance) >= 1
    best = min(max(stage_sums(costs, b)) for b in compositions(len(costs), k))
    assert max(stage_sums(costs, balance)) == pytest.approx(best)


def test_balance_by_time_splits_a_heavy_tail():
    profile = [LayerProfile(str(i), t, 2 * t, 0, 0) for i, t in enumerate([1, 1, 1, 1, 4])]
    assert balance_by_time(profile, 2) == [4, 1]


def test_balance_by_size_weighs_parameters_by_param_scale():
    profile = [LayerProfile("emb", 0, 0, 10, 100), LayerProfile("a", 0, 0, 50, 0),
               LayerProfile("b", 0, 0, 50, 0), LayerProfile("c", 0, 0, 50, 0)]
    assert balance_by_size(profile, 2, param_scale=0) == [2, 2]
    assert balance_by_size(profile, 2, param_scale=4) == [1, 3]


def test_ties_give_the_later_stages_the_spare_layers():
    assert balance_cost([1.0] * 4, 3) == [1, 1, 2]


@pytest.mark.parametrize("call, words", [
    (lambda: balance_cost([1.0, 2.0], 3), "cannot cut 2 layers into 3"),
    (lambda: balance_cost([1.0], 0), "at least 1 partition"),
    (lambda: balance_by_size(uniform_profile(2, 1, 1), 1, param_scale=-1), "param_scale"),
])
def test_bad_balance_input_gets_a_clear_error(call, words):
    with pytest.raises(ValueError, match=words):
        call()


# -- PipeDream's planner ------------------------------------------------------------------------

def brute_force_plan(profile, devices, bandwidth, latency, duplex):
    best = float("inf")
    for k in range(1, min(len(profile), devices) + 1):
        for balance in compositions(len(profile), k):
            for replicas in itertools.product(range(1, devices + 1), repeat=k):
                if sum(replicas) <= devices:
                    best = min(best, plan_time(profile, balance, replicas, bandwidth, latency,
                                               duplex))
    return best


layers = st.lists(st.tuples(st.floats(0.01, 1.0), st.integers(0, 2000), st.integers(0, 5000)),
                  min_size=1, max_size=5)


@given(costs=layers, devices=st.integers(1, 4), latency=st.sampled_from([0.0, 1e-3]),
       duplex=st.booleans())
def test_planner_finds_the_brute_force_optimum(costs, devices, latency, duplex):
    profile = [LayerProfile(str(i), t, 2 * t, 0, w, out) for i, (t, out, w) in enumerate(costs)]
    bandwidth = 1e4
    plan = plan_pipedream(profile, devices, bandwidth, latency, duplex)
    assert plan.time_per_input_s == pytest.approx(
        brute_force_plan(profile, devices, bandwidth, latency, duplex))
    assert plan.time_per_input_s == pytest.approx(
        plan_time(profile, plan.balance, plan.replicas, bandwidth, latency, duplex))
    assert sum(plan.balance) == len(profile) and plan.devices <= devices
    assert plan.throughput == pytest.approx(1 / plan.time_per_input_s)


def test_planner_replicates_when_weights_are_cheap_and_pipelines_when_they_are_not():
    cheap = uniform_profile(4, 1.0, 2.0, activation_bytes=10, parameter_bytes=10)
    plan = plan_pipedream(cheap, 4, bandwidth_Bps=1e6)
    assert (plan.balance, plan.replicas) == ([4], [4])  # pure data parallelism
    heavy = uniform_profile(4, 1.0, 2.0, activation_bytes=10, parameter_bytes=10**8)
    plan = plan_pipedream(heavy, 4, bandwidth_Bps=1e6)
    assert (plan.balance, plan.replicas) == ([1, 1, 1, 1], [1, 1, 1, 1])  # pure pipeline
    assert plan.time_per_input_s == pytest.approx(3.0)


def test_stage_time_overlaps_the_all_reduce_with_compute():
    profile = uniform_profile(2, 1.0, 2.0, parameter_bytes=10**6)
    sync = ring_all_reduce_cost(2, 2 * 10**6, 0.0, 1e-6)
    assert stage_time(profile, range(2), 2, 1e6) == pytest.approx(max(6.0, sync) / 2)


def test_bad_planner_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="at least 1 device"):
        plan_pipedream(uniform_profile(2, 1, 1), 0, 1e9)
    with pytest.raises(ValueError, match="bandwidth must be > 0"):
        plan_pipedream(uniform_profile(2, 1, 1), 2, 0)
