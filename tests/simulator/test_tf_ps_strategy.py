"""The simulated ClusterCoordinator: closures pulled from one queue by workers (ch. 19)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.tf_distribute.ps_strategy import (
    Channel,
    ClosureCost,
    Request,
    closure_time_s,
    greedy_makespan,
    simulate_closures,
)

COST = ClosureCost(dispatch_bytes=300, pulls=(Request(0, 512, 4096), Request(1, 512, 4096)),
                   compute_s=0.004, pushes=(Request(0, 4608, 0), Request(1, 4608, 0)))
CHANNEL = Channel(latency_s=1e-4, bandwidth_Bps=1e9)
FREE = Channel(latency_s=0.0, bandwidth_Bps=math.inf)
"""No latency, infinite bandwidth: only the compute costs."""

INCOMMENSURATE = (1.0, math.sqrt(2), math.sqrt(3), math.sqrt(5), math.sqrt(7))
"""Slowdowns no two multiples of which meet (a tie would let either worker take a closure)."""


def test_one_closure_on_one_worker_is_the_closed_form() -> None:
    result = simulate_closures(1, 1, COST, CHANNEL, num_ps=2)
    assert result.makespan_s == pytest.approx(closure_time_s(COST, CHANNEL))
    # dispatch, 4 round trips (8 messages), compute, result: 10 messages of α each
    assert closure_time_s(COST, CHANNEL) == pytest.approx(
        10 * 1e-4 + (300 + 2 * 512 + 2 * 4096 + 2 * 4608 + 64) / 1e9 + 0.004)


@given(st.integers(0, 40), st.lists(st.sampled_from(INCOMMENSURATE), min_size=1, max_size=5))
def test_nothing_shared_is_the_greedy_schedule(closures: int, slowdown: list[float]) -> None:
    result = simulate_closures(closures, len(slowdown), COST, FREE, num_ps=2,
                               slowdown=slowdown)
    per_closure = [COST.compute_s * s for s in slowdown]
    assert result.makespan_s == pytest.approx(greedy_makespan(closures, per_closure))
    assert sorted(c for c, *_ in result.runs) == list(range(closures))


def test_greedy_makespan_waits_for_a_slow_workers_last_closure() -> None:
    # at t = 3 all three are free and three closures are left: the slow one takes one
    assert greedy_makespan(10, [1.0, 1.0, 3.0]) == 6.0
    assert greedy_makespan(0, [1.0]) == 0.0


def test_straggler_runs_fewer_closures() -> None:
    result = simulate_closures(30, 3, COST, CHANNEL, num_ps=2, slowdown=[1.0, 1.0, 4.0])
    fast, _, slow = result.closures_per_worker(3)
    assert slow < fast and sum(result.closures_per_worker(3)) == 30


def test_lost_worker_closure_runs_again_and_only_once() -> None:
    alone = simulate_closures(12, 2, COST, CHANNEL, num_ps=2)
    lost = simulate_closures(12, 2, COST, CHANNEL, num_ps=2, failures={1: 0.011})
    (worker, closure, at_s), = lost.lost
    assert worker == 1 and closure is not None and at_s == pytest.approx(0.011)
    assert sorted(c for c, *_ in lost.runs) == list(range(12))  # each completed once
    assert [w for c, w, *_ in lost.runs if c == closure] == [0]
    assert lost.makespan_s > alone.makespan_s


def test_every_worker_lost_fails_naming_them() -> None:
    with pytest.raises(RuntimeError, match=r"closures left and no worker: lost worker 0 at "
                                           r"0\.005 s, worker 1 at 0\.006 s"):
        simulate_closures(12, 2, COST, CHANNEL, num_ps=2, failures={0: 0.005, 1: 0.006})


def test_busy_ps_makes_workers_queue() -> None:
    one_ps = ClosureCost(300, (Request(0, 512, 4096),), 0.0, (Request(0, 4608, 0),))
    free = simulate_closures(8, 4, one_ps, CHANNEL, num_ps=1)
    busy = simulate_closures(8, 4, one_ps, CHANNEL, num_ps=1, ps_busy_s=1e-3)
    # 16 requests served one at a time at the single ps: at least 16 ms
    assert busy.makespan_s >= 16e-3 > free.makespan_s


def test_shared_cores_slow_the_computes() -> None:
    alone = simulate_closures(8, 4, COST, FREE, num_ps=2)
    shared = simulate_closures(8, 4, COST, FREE, num_ps=2, cores=2)
    assert shared.makespan_s == pytest.approx(2 * alone.makespan_s)
