"""Grading exercise 13.3: the cost of RPC calls, against a simulated caller and workers."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology, run_spmd
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch13, pytest.mark.ex13_3]

TODO = ("calls_time is not implemented yet: write it in exercises/ch13_rpc_call.py "
        "(EXERCISE 13.3), then run `make grade EX=13.3` again")


def callers(comm, calls, asynchronous):
    """Rank 0 calls worker i + 1 with calls[i]; the workers run and answer."""
    if comm.rank == 0:
        if asynchronous:
            for i, (n_in, _, _) in enumerate(calls):
                comm.isend(i + 1, n_in)
            for i, (_, n_out, _) in enumerate(calls):
                yield from comm.recv(i + 1, n_out)
        else:
            for i, (n_in, n_out, _) in enumerate(calls):
                yield from comm.send(i + 1, n_in)
                yield from comm.recv(i + 1, n_out)
    else:
        n_in, n_out, exec_s = calls[comm.rank - 1]
        yield from comm.recv(0, n_in)
        yield comm.env.timeout(exec_s)
        yield from comm.send(0, n_out)


def simulated(calls, alpha, bandwidth, asynchronous):
    link = Link(alpha, bandwidth, "none")
    cpu = Device("grading", flops_per_s=1e10, mem_bandwidth_Bps=1e10, memory_bytes=math.inf)
    cluster = Cluster.homogeneous("grading", cpu,
                                  Topology.fully_connected(len(calls) + 1, link))
    return run_spmd(cluster, callers, calls, asynchronous).makespan_s


@settings(max_examples=40, deadline=None)
@given(calls=st.lists(st.tuples(st.integers(0, 2**22), st.integers(0, 2**22),
                                st.floats(0, 0.05)), min_size=1, max_size=6),
       alpha=st.floats(1e-6, 1e-3), bandwidth=st.floats(1e7, 1e11), asynchronous=st.booleans())
def test_equal_to_the_simulated_calls(calls, alpha, bandwidth, asynchronous):
    expected = simulated(calls, alpha, bandwidth, asynchronous)
    got = call_or_fail("ch13_rpc_call", "calls_time", TODO, calls, alpha, 1 / bandwidth,
                       asynchronous)
    assert got == pytest.approx(expected, rel=1e-6), (
        f"{calls}, α = {alpha}, async {asynchronous}: you {got}, simulated {expected}")


def test_no_calls_take_no_time():
    assert call_or_fail("ch13_rpc_call", "calls_time", TODO, [], 1e-5, 1e-9, True) == 0.0
