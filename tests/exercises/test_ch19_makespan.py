"""Grading exercise 19.2: the makespan of closures pulled greedily from the coordinator's queue,
against the simulated ClusterCoordinator."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.tf_distribute import ps_strategy as sim
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch19, pytest.mark.ex19_2]

TODO = ("greedy_makespan is not implemented yet: write it in exercises/ch19_makespan.py "
        "(EXERCISE 19.2), then run `make grade EX=19.2` again")

FREE = sim.Channel(latency_s=0.0, bandwidth_Bps=math.inf)
"""No latency, infinite bandwidth: a closure costs only its compute."""

STRAGGLERS = (math.sqrt(2), math.sqrt(3), math.sqrt(5), math.sqrt(7), 3 * math.sqrt(11))
"""Slowdowns whose multiples never meet one another's or an integer: no two workers of
different speeds are ever free at the same moment, so no tie decides the simulated run."""


def makespan(closures, per_closure_s):
    return call_or_fail("ch19_makespan", "greedy_makespan", TODO, closures, per_closure_s)


def simulated(closures, compute_s, slowdown):
    cost = sim.ClosureCost(dispatch_bytes=0, pulls=(), compute_s=compute_s, pushes=(),
                           result_bytes=0)
    return sim.simulate_closures(closures, len(slowdown), cost, FREE,
                                 slowdown=slowdown).makespan_s


@settings(max_examples=60, deadline=None)
@given(closures=st.integers(0, 60), nominal=st.integers(0, 4),
       stragglers=st.lists(st.sampled_from(STRAGGLERS), max_size=3),
       compute_s=st.floats(1e-3, 2.0))
def test_equal_to_the_simulated_coordinator(closures, nominal, stragglers, compute_s):
    slowdown = [1.0] * nominal + stragglers or [1.0]
    got = makespan(closures, [compute_s * s for s in slowdown])
    expected = simulated(closures, compute_s, slowdown)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12), (
        f"{closures} closures of {compute_s:g} s on workers slowed {slowdown}: you {got}, "
        f"the simulated coordinator {expected}")


@settings(max_examples=60)
@given(closures=st.integers(0, 40), per_closure_s=st.lists(st.integers(1, 5), min_size=1,
                                                          max_size=5))
def test_ties_go_to_the_lower_index(closures, per_closure_s):
    times = [float(t) for t in per_closure_s]
    expected = sim.greedy_makespan(closures, times)
    got = makespan(closures, times)
    assert got == expected, f"{closures} closures on workers of {times} s: you {got}, " \
                            f"the simulator's closed form {expected}"


def test_the_question_a_straggler_can_make_the_run_slower():
    assert makespan(12, [1.0, 1.0, 1.0]) == 4.0
    with_straggler = makespan(12, [1.0, 1.0, 1.0, 10.0])
    assert with_straggler == 10.0, (
        f"a fourth worker at 10 s per closure takes one closure at t = 0 and holds it to "
        f"t = 10 while the others finish the rest by t = 4; you say {with_straggler}")


@settings(max_examples=60)
@given(closures=st.integers(0, 40), nominal=st.lists(st.floats(0.1, 2.0), min_size=1,
                                                     max_size=4),
       straggler_s=st.floats(0.1, 50.0))
def test_a_straggler_costs_at_most_its_own_closure_time(closures, nominal, straggler_s):
    without = makespan(closures, nominal)
    with_straggler = makespan(closures, [*nominal, straggler_s])
    assert with_straggler <= without + straggler_s * (1 + 1e-12), (
        f"{closures} closures on {nominal} s, plus a straggler of {straggler_s} s: "
        f"{with_straggler} with it, {without} without")


def test_no_closures_take_no_time():
    assert makespan(0, [1.0, 2.0]) == 0.0
