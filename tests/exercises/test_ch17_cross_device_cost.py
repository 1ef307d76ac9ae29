"""Grading exercise 17.3: the cross-device ops priced on one host thread, against the
simulated twin.

Run with ``make grade EX=17.3`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex17_3
tests/exercises`` (the reference answer).
"""

import functools
import statistics
import time

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from simulator.tf_distribute.mirrored import (
    CROSS_DEVICE_OPS,
    Host,
    HostRates,
    hierarchical_copy_all_reduce,
)
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch17, pytest.mark.ex17_3]

TODO = ("cross_device_op_s / fastest are not implemented yet: write them in "
        "exercises/ch17_cross_device_cost.py (EXERCISE 17.3), then run `make grade EX=17.3` "
        "again")
CASES = st.tuples(st.integers(1, 2**18).map(lambda e: 4 * e), st.integers(2, 9),
                  st.floats(1e8, 5e10), st.floats(1e8, 5e10), st.integers(1, 5))


def simulated_s(op, nbytes, k, memcpy, reduce, group_size):
    """The simulated twin's time of ``op``: its copies and additions on one host thread."""
    env = simpy.Environment()
    host = Host(env, HostRates(memcpy, reduce, cores=1))
    run = (functools.partial(hierarchical_copy_all_reduce, group_size=group_size)
           if op == "hierarchical" else CROSS_DEVICE_OPS[op])
    env.process(run(host, nbytes, k))
    env.run()
    return float(env.now)


def call(function, *args):
    return call_or_fail("ch17_cross_device_cost", function, TODO, *args)


@pytest.mark.parametrize("op", ["ring", "one_device", "hierarchical"])
@given(case=CASES)
def test_each_op_costs_what_the_simulated_thread_spends(op, case):
    nbytes, k, memcpy, reduce, group = case
    assert call("cross_device_op_s", op, nbytes, k, memcpy, reduce, group) == pytest.approx(
        simulated_s(op, nbytes, k, memcpy, reduce, group), rel=1e-9), (
        f"{op}: {nbytes} B on {k} replicas, groups of {group}")


@given(CASES)
def test_fastest_names_an_op_of_least_simulated_time(case):
    nbytes, k, memcpy, reduce, group = case
    times = {op: simulated_s(op, nbytes, k, memcpy, reduce, group) for op in CROSS_DEVICE_OPS}
    choice = call("fastest", nbytes, k, memcpy, reduce, group)
    assert times[choice] <= min(times.values()) * (1 + 1e-9), (choice, times)


def test_an_unknown_op_raises_value_error():
    try:
        call("cross_device_op_s", "nccl", 4096, 4, 1e9, 1e9, 2)
    except ValueError:
        return
    pytest.fail("cross_device_op_s('nccl', ...) should raise ValueError", pytrace=False)


def median_s(fn, repeats=7):
    """Median seconds of ``fn()`` over ``repeats`` calls, after one warm-up."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def test_measure_your_costs_against_the_real_ops_on_this_host():
    """Predict, then measure: the real cross-device ops on CPU "devices" of this process, the
    copy and addition rates measured on the same buffers; scored as exercise 3.4 is
    (:func:`tests.exercises.measured.judge`: your median error within the tolerance of the
    simulated twin's own, from the same rates)."""
    import torch

    from backends.tf_distribute import (
        HierarchicalCopyAllReduce,
        ReduceOp,
        ReductionToOneDevice,
        RingAllReduce,
    )
    from tests.exercises.measured import judge

    call("cross_device_op_s", "ring", 4096, 2, 1e9, 1e9, 2)  # a stub fails here
    real = {"ring": RingAllReduce(), "one_device": ReductionToOneDevice(),
            "hierarchical": HierarchicalCopyAllReduce(2)}
    points, yours, lab, measured = [], [], [], []
    saved = torch.get_num_threads()
    torch.set_num_threads(1)  # one host thread, as the merge call
    try:
        for elements in (2**18, 2**21):
            nbytes = 4 * elements
            a, b = torch.rand(elements), torch.rand(elements)
            memcpy = nbytes / median_s(lambda a=a: a.to("cpu", copy=True))
            reduce = nbytes / median_s(lambda a=a, b=b: a.add_(b))
            for k in (2, 4):
                buffers = [torch.rand(elements) for _ in range(k)]
                for op, impl in real.items():
                    points.append(f"{op}, {k} replicas, {nbytes // 2**20} MiB")
                    measured.append(median_s(
                        lambda impl=impl, buffers=buffers: impl.all_reduce(ReduceOp.SUM,
                                                                           buffers)))
                    yours.append(call("cross_device_op_s", op, nbytes, k, memcpy, reduce, 2))
                    lab.append(simulated_s(op, nbytes, k, memcpy, reduce, 2))
    finally:
        torch.set_num_threads(saved)
    judge(points, yours, {"the lab's simulated twin": lab}, measured,
          "cross-device ops on one host thread")
