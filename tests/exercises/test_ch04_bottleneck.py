"""Grading exercise 4.2: the predicted best replica count is the simulated twin's argmin.

Run with ``make grade CH=04`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch04
tests/exercises`` (the reference answer).
"""

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology
from simulator.data_parallel import Workload, simulate_data_parallel
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch04, pytest.mark.ex04_2]

TODO = ("best_replica_count is not implemented yet: write it in exercises/ch04_bottleneck.py "
        "(EXERCISE 4.2: evaluate T(p) for every p and take the smallest argmin), then run "
        "`make grade CH=04` again")


@dataclass(frozen=True)
class PerSample:
    """The exercise's compute model: f and g seconds per sample, no loss or step."""

    f: float
    g: float

    def forward_s(self, batch):
        return batch * self.f

    def backward_s(self, batch):
        return batch * self.g

    def loss_s(self, batch):
        return 0.0

    def step_s(self):
        return 0.0


def best(*args):
    return call_or_fail("ch04_bottleneck", "best_replica_count", TODO, *args)


def simulated_best(max_devices, batch, param_bytes, f, g, alpha, beta, gamma):
    device = Device("gpu", 1e12, 3 / gamma if gamma else 1e30, 1e11, reduce_Bps=1 / gamma
                    if gamma else 1e30)
    link = Link(alpha, 1 / beta, "none")
    workload = Workload(batch, 0, 0, param_bytes)
    times = {}
    for p in range(1, max_devices + 1):
        cluster = Cluster.homogeneous("pcie", device, Topology.switch(p, link))
        times[p] = simulate_data_parallel(cluster, workload, PerSample(f, g)).makespan_s
    return min(times, key=lambda p: (round(times[p], 15), p)), times


@given(batch=st.integers(1, 4096), param_mb=st.floats(0.01, 400),
       per_sample_us=st.floats(0.1, 200), alpha_us=st.floats(0.5, 50),
       bandwidth_GBps=st.floats(1, 300), gamma_ns=st.sampled_from([0.0, 0.01, 0.1]))
def test_equals_the_simulated_argmin(batch, param_mb, per_sample_us, alpha_us, bandwidth_GBps,
                                     gamma_ns):
    args = (12, batch, param_mb * 1e6, per_sample_us * 1e-6 / 3, 2 * per_sample_us * 1e-6 / 3,
            alpha_us * 1e-6, 1 / (bandwidth_GBps * 1e9), gamma_ns * 1e-9)
    p = best(*args)
    expected, times = simulated_best(*args)
    assert isinstance(p, int), f"best_replica_count returned {p!r}, not an int"
    assert times[p] == pytest.approx(times[expected], rel=1e-9), (
        f"you chose p = {p} ({times[p] * 1e3:.4f} ms), the simulation is fastest at "
        f"p = {expected} ({times[expected] * 1e3:.4f} ms)")


def test_expensive_copies_keep_one_device_and_free_copies_use_all():
    assert best(8, 1024, 1e9, 1e-6, 2e-6, 1e-5, 1 / 1e9, 0.0) == 1
    assert best(8, 1024, 1e3, 1e-3, 2e-3, 1e-9, 1 / 1e12, 0.0) == 8


def test_the_textbook_example_is_near_six():
    assert best(16, 4096, 4e6, 1e-6, 2e-6, 5e-6, 1 / 24e9, 0.0) in (5, 6, 7)


@pytest.mark.parametrize("max_devices, batch", [(0, 10), (4, 0)])
def test_bad_input_raises_value_error(max_devices, batch):
    with pytest.raises(ValueError):
        best(max_devices, batch, 1e6, 1e-6, 1e-6, 1e-6, 1e-9, 0.0)
