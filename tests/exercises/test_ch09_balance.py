"""Grading exercise 9.1: balance_by_time against brute force and the simulated pipeline.

Run with ``make grade CH=09`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch09
tests/exercises`` (the reference answer).
"""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology
from simulator.pipeline import LayerProfile, simulate_pipeline
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch09, pytest.mark.ex09_1]

TODO = ("balance_by_time is not implemented yet: write it in exercises/ch09_balance.py "
        "(EXERCISE 9.1: contiguous partitions minimising the slowest one), then run "
        "`make grade CH=09` again")


def balance(times, k):
    """The function under test (``DISTML_IMPL`` picks yours or the reference)."""
    return call_or_fail("ch09_balance", "balance_by_time", TODO, list(times), k)


def slowest(times, parts):
    edges = list(itertools.accumulate(parts, initial=0))
    return max(sum(times[a:b]) for a, b in itertools.pairwise(edges))


def brute_force(times, k):
    n = len(times)
    return min(slowest(times, [b - a for a, b in itertools.pairwise((0, *cuts, n))])
               for cuts in itertools.combinations(range(1, n), k - 1))


@given(times=st.lists(st.floats(0, 10), min_size=1, max_size=9), data=st.data())
def test_slowest_partition_is_the_brute_force_optimum(times, data):
    k = data.draw(st.integers(1, len(times)))
    parts = balance(times, k)
    assert len(parts) == k and sum(parts) == len(times) and min(parts) >= 1, (
        f"balance_by_time({times}, {k}) = {parts} is not {k} positive parts summing to "
        f"{len(times)}")
    assert slowest(times, parts) == pytest.approx(brute_force(times, k)), (
        f"balance_by_time({times}, {k}) = {parts}: slowest partition "
        f"{slowest(times, parts)}, the best possible is {brute_force(times, k)}")


@given(times=st.lists(st.floats(0.1, 5), min_size=4, max_size=8))
def test_each_extra_microbatch_costs_the_best_possible_slowest_stage_in_the_simulation(times):
    # GPipe on a free network takes Σ(t_F + t_B) + (m − 1)·(max t_F + max t_B) exactly; with
    # t_F = t/3 and t_B = 2t/3 on every layer, the step grows by the slowest stage's t per
    # micro-batch.
    k = 3
    profile = [LayerProfile(str(i), t / 3, 2 * t / 3, 0, 0) for i, t in enumerate(times)]
    link = Link(0.0, 1e12, "none")
    cluster = Cluster.homogeneous("grading", Device("grading", 1e12, 1e12, 1e15),
                                  Topology.fully_connected(k, link))
    parts = balance(times, k)
    step = [simulate_pipeline(cluster, profile, parts, m, "gpipe", trace=False).step_time_s
            for m in (4, 5)]
    assert step[1] - step[0] == pytest.approx(brute_force(times, k)), (
        f"with your balance {parts} each extra micro-batch costs {step[1] - step[0]:.4f} s; "
        f"the best balance costs {brute_force(times, k):.4f} s")
