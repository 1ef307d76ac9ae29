"""Grading exercise 2.3: busbw_factor is nccl-tests' factor, and makes busbw the link's bandwidth.

Run with ``make grade CH=02`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch02
tests/exercises`` (the reference answer).
"""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.nccl_tests import BUSBW_FACTORS
from simulator.collectives import ALGORITHMS
from simulator.core import Cluster, Device, Link, Topology, run_spmd
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch02, pytest.mark.ex02_3]

TODO = ("busbw_factor is not implemented yet: write it in exercises/ch02_busbw.py "
        "(EXERCISE 2.3: f = the bytes some rank's link must carry / S), then run "
        "`make grade CH=02` again")


def factor(operation, p):
    """The factor under test (``DISTML_IMPL`` picks yours or the reference); a stub fails here."""
    return call_or_fail("ch02_busbw", "busbw_factor", TODO, operation, p)


@given(p=st.integers(1, 1024))
def test_equals_nccl_tests_factor_for_every_operation(p):
    for operation, expected in BUSBW_FACTORS.items():
        f = factor(operation, p)
        assert isinstance(f, float), f"busbw_factor({operation!r}, {p}) returned {f!r}"
        assert f == pytest.approx(expected(p), rel=1e-12, abs=1e-15), (
            f"busbw_factor({operation!r}, p={p}) = {f}, nccl-tests uses {expected(p)}")


def test_unknown_operation_raises_value_error():
    with pytest.raises(ValueError):
        factor("allreduce", 4)


# ---- sim vs formula: busbw of a bandwidth-optimal algorithm is the link's bandwidth -----------

BANDWIDTH_Bps = 1e9
NBYTES = 2**26  # 64 MiB: large enough that the chain's pipeline fill is 1 % of its time
BANDWIDTH_OPTIMAL = {  # operation -> (algorithm, extra arguments of its rank program)
    "all_reduce": ("ring", {}),
    "reduce_scatter": ("ring", {}),
    "all_gather": ("ring", {}),
    "all_to_all": ("pairwise", {}),
    "broadcast": ("pipelined_chain", {"segment_bytes": NBYTES // 512}),
    "scatter": ("linear", {}),
    "gather": ("linear", {}),
}
"""Reduce is left out: the lab has no pipelined-chain reduce, the algorithm that attains f = 1."""


def switch_cluster(p):
    """``p`` ranks on one switch, every port ``BANDWIDTH_Bps`` each way, no latency, shared
    fairly; reductions so fast that they cost nothing."""
    port = Link(0.0, BANDWIDTH_Bps, "fair")
    ideal = Device("ideal", flops_per_s=1e18, mem_bandwidth_Bps=1e18, memory_bytes=math.inf)
    return Cluster.homogeneous("switch", ideal, Topology.switch(p, port))


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("operation", list(BANDWIDTH_OPTIMAL))
def test_busbw_of_a_bandwidth_optimal_algorithm_is_the_link_bandwidth(operation, p):
    algorithm, extra = BANDWIDTH_OPTIMAL[operation]
    program = ALGORITHMS[operation][algorithm][0]
    nbytes = NBYTES // (4 * p) * (4 * p)  # whole float32 pieces for every rank
    seconds = run_spmd(switch_cluster(p), program, nbytes, trace=False, **extra).makespan_s
    algbw = nbytes / seconds
    busbw = algbw * factor(operation, p)
    assert busbw == pytest.approx(BANDWIDTH_Bps, rel=0.02), (
        f"{operation}.{algorithm} on {p} ranks with {BANDWIDTH_Bps / 1e9:g} GB/s links: algbw "
        f"{algbw / 1e9:.3f} GB/s, your busbw {busbw / 1e9:.3f} GB/s (should be the link's)")
