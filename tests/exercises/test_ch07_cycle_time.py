"""Grading exercise 7.2: the self-clocked cycle ({eq}`eq-horovod-cycle`) and the best cycle time,
graded against the simulator (``simulator.horovod``: the closed form and the simulated step).

The measurement of the same sweep is in notebook 07 and is not graded: on a 2-core machine the
step times of nearby cycle times lie within each other's p10–p90 bands.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology
from simulator.ddp import Layer, Workload
from simulator.horovod import (
    HorovodCosts,
    HorovodSettings,
    cycle_fixed_point,
    predict_step,
    ring_cost,
)
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch07, pytest.mark.ex07_2]

TODO_A = ("self_clocked_cycle is not implemented yet: write it in exercises/ch07_cycle_time.py "
          "(EXERCISE 7.2a), then run `make grade CH=07` again")
TODO_B = ("predict_best_cycle_time is not implemented yet: write it in "
          "exercises/ch07_cycle_time.py (EXERCISE 7.2b), then run `make grade CH=07` again")
KiB, MiB = 2**10, 2**20
CYCLES = [0.25e-3, 0.5e-3, 1e-3, 2e-3, 5e-3, 10e-3, 25e-3]
TOLERANCE = 0.01  # the simulated step at your cycle time may be this much slower than the best


def fixed_point(*args):
    return call_or_fail("ch07_cycle_time", "self_clocked_cycle", TODO_A, *args)


def best(backward_s, param_bytes, world, alpha, beta, c0, threshold):
    return call_or_fail("ch07_cycle_time", "predict_best_cycle_time", TODO_B, backward_s,
                        param_bytes, CYCLES, world, alpha, beta, c0, threshold)


def simulated(backward_s, param_bytes, world, alpha, beta, c0, threshold, cycle):
    """The simulator's step: both threads of every rank, negotiation c0 per cycle, fused ring
    all-reduces on a contention-free network, free copies and optimizer."""
    a, beta_prime = ring_cost(world, alpha, beta)
    device = Device("free", 1e30, 1e30, 1e30)
    cluster = Cluster.homogeneous("net", device, Topology.fully_connected(
        world, Link(alpha, 1 / beta, "none")))
    work = Workload(tuple(Layer(f"l{i}", (n,), 0.0, t)
                          for i, (t, n) in enumerate(zip(backward_s, param_bytes, strict=True))))
    costs = HorovodCosts(lambda n: a + n * beta_prime, c0)
    return predict_step(cluster, work, HorovodSettings(threshold, cycle), costs).step_s


def test_the_chapters_resnet50_example():
    # N = 102.4 MB, T_b = 200 ms, p = 8, α = 30 µs, β = 0.8 ns/B, c₀ = 0.09 ms
    got = fixed_point(102.4e6, 0.2, 8, 30e-6, 0.8e-9, 0.09e-3)
    assert got is not None, "ResNet-50 on 10 Gb/s has a fixed point (T_b/N > β')"
    length, x = got
    assert length == pytest.approx(1.80e-3, abs=0.01e-3), f"L = {length * 1e3:.3f} ms"
    assert x == pytest.approx(0.92e6, abs=0.01e6), f"x = {x / 1e6:.3f} MB"


@settings(max_examples=50)
@given(nbytes=st.floats(1e3, 1e9), backward=st.floats(1e-4, 1.0), world=st.integers(2, 64),
       alpha=st.floats(1e-7, 1e-3), bandwidth=st.floats(1e7, 1e11), c0=st.floats(0, 1e-3))
def test_the_fixed_point_agrees_with_the_simulator(nbytes, backward, world, alpha, bandwidth,
                                                    c0):
    got = fixed_point(nbytes, backward, world, alpha, 1 / bandwidth, c0)
    a, beta_prime = ring_cost(world, alpha, 1 / bandwidth)
    want = cycle_fixed_point(nbytes, backward, a, beta_prime, c0)
    if want is None:
        assert got is None, ("backward produces bytes faster than the ring carries them "
                             f"(T_b/N = {backward / nbytes:.3g} ≤ β' = {beta_prime:.3g} s/B): "
                             "there is no fixed point, return None")
    else:
        assert got is not None, "T_b/N > β': there is a fixed point"
        assert got == pytest.approx(want, rel=1e-9)


def _explain(mine, top, times, backward_s, param_bytes, world, alpha, beta, c0):
    a, _ = ring_cost(world, alpha, beta)
    fp = cycle_fixed_point(sum(param_bytes), sum(backward_s), a, ring_cost(world, alpha,
                                                                          beta)[1], c0)
    busy = (f"the self-clocked cycle L = {fp[0] * 1e3:.3g} ms" if fp else
            "no self-clocked cycle (backward outruns the network)")
    why = ("a longer cycle leaves the last gradients waiting up to a cycle after backward ends"
           if mine > top else
           "a shorter cycle starts all-reduces before enough gradients are ready, so it pays "
           f"the latency a = {a * 1e3:.3g} ms more often"
           + (f" and the negotiation c₀ = {c0 * 1e3:.3g} ms in more cycles" if c0 else ""))
    return (f"your cycle time {mine * 1e3:g} ms: simulated {times[mine] * 1e3:.4g} ms; the "
            f"best, {top * 1e3:g} ms: {times[top] * 1e3:.4g} ms "
            f"({times[mine] / times[top] - 1:.1%} slower; {busy}); {why}")


@settings(max_examples=25, deadline=None)
@given(layers=st.lists(st.tuples(st.floats(1e-5, 5e-3), st.integers(1, 4 * MiB)),
                       min_size=2, max_size=16),
       world=st.integers(2, 16), alpha=st.floats(1e-6, 1e-3), bandwidth=st.floats(1e8, 1e11),
       c0=st.sampled_from([0.0, 2e-5, 2e-4, 1e-3]),
       threshold=st.sampled_from([64 * KiB, MiB, 16 * MiB, 128 * MiB]))
def test_your_cycle_time_is_as_good_as_the_simulators_best(layers, world, alpha, bandwidth, c0,
                                                           threshold):
    backward_s, param_bytes = [t for t, _ in layers], [n for _, n in layers]
    beta = 1 / bandwidth
    mine = best(backward_s, param_bytes, world, alpha, beta, c0, threshold)
    assert mine in CYCLES, f"{mine} is not one of the candidates {CYCLES}"
    times = {c: simulated(backward_s, param_bytes, world, alpha, beta, c0, threshold, c)
             for c in CYCLES}
    top = min(times, key=times.__getitem__)
    assert times[mine] <= times[top] * (1 + TOLERANCE) + 1e-12, _explain(
        mine, top, times, backward_s, param_bytes, world, alpha, beta, c0)


def test_an_idle_thread_wants_a_cycle_no_longer_than_the_gap_between_gradients():
    # a gradient every 2 ms, each all-reduce ~0.1 ms, free negotiation: the thread is idle,
    # and a cycle longer than 2 ms only makes the last gradient wait for the next cycle
    backward_s, param_bytes = [2e-3] * 16, [256 * KiB] * 16
    assert best(backward_s, param_bytes, 4, 5e-6, 1 / 10e9, 0.0, 128 * MiB) <= 2e-3


def test_a_latency_bound_network_wants_one_all_reduce_after_backward():
    # 32 small gradients over 3.2 ms, a = 2(p−1)α = 6 ms, c₀ = 1 ms: a 0.25 ms cycle starts an
    # all-reduce at 1 ms with the gradients ready then, and pays a again for the rest; a 5 ms
    # cycle waits until all are ready and pays a once (12 ms against 15 ms)
    backward_s, param_bytes = [1e-4] * 32, [4 * KiB] * 32
    assert best(backward_s, param_bytes, 4, 1e-3, 1 / 10e9, 1e-3, 128 * MiB) == 5e-3
