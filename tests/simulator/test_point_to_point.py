"""Ping-pong, the stream and naive one-to-all: simulation equals the α-β closed form without
contention."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.point_to_point import (
    one_to_all,
    one_to_all_cost,
    ping_pong,
    ping_pong_cost,
    stream,
    stream_cost,
)
from simulator.core import Cluster, Device, Link, Topology, run_spmd

DEV = Device("test", flops_per_s=1e12, mem_bandwidth_Bps=1e11, memory_bytes=1e9)
alphas = st.floats(0, 1e-3)
bandwidths = st.floats(1e6, 1e12)
sizes = st.integers(0, 2**30)


def fully_connected(p, alpha, bw, model="none"):
    return Cluster.homogeneous("t", DEV, Topology.fully_connected(p, Link(alpha, bw, model)))


@given(alpha=alphas, bw=bandwidths, n=sizes, p=st.integers(2, 9))
def test_ping_pong_equals_closed_form(alpha, bw, n, p):
    result = run_spmd(fully_connected(p, alpha, bw), ping_pong, n)
    assert result.makespan_s == pytest.approx(ping_pong_cost(n, alpha, 1 / bw), rel=1e-12)


@given(alpha=alphas, bw=bandwidths, n=sizes, p=st.integers(2, 9), calls=st.integers(1, 5))
def test_stream_equals_closed_form_per_message(alpha, bw, n, p, calls):
    # eager sends: one message after another, each α + nβ
    result = run_spmd(fully_connected(p, alpha, bw), stream, n, calls=calls)
    assert result.makespan_s == pytest.approx(calls * stream_cost(n, alpha, 1 / bw), rel=1e-12)
    assert result.total_bytes == calls * n


@given(alpha=alphas, bw=bandwidths, n=sizes, p=st.integers(1, 17), root=st.integers(0, 16))
def test_one_to_all_equals_closed_form(alpha, bw, n, p, root):
    root %= p
    result = run_spmd(fully_connected(p, alpha, bw), one_to_all, n, root)
    expected = one_to_all_cost(p, n, alpha, 1 / bw)
    assert result.makespan_s == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert result.total_bytes == (p - 1) * n


@pytest.mark.parametrize("model", ["fair", "fifo"])
def test_one_to_all_is_sequential_so_contention_changes_nothing(model):
    # The root waits for each send to end before the next: never two flows at once.
    result = run_spmd(fully_connected(5, 1e-5, 1e9, model), one_to_all, 10**6)
    assert result.makespan_s == pytest.approx(one_to_all_cost(5, 10**6, 1e-5, 1e-9))


def test_one_to_all_over_a_switch_costs_the_same_as_direct_links():
    topo = Topology.switch(4, Link(2e-5, 1e9, "fair"))
    result = run_spmd(Cluster.homogeneous("t", DEV, topo), one_to_all, 10**6)
    assert result.makespan_s == pytest.approx(one_to_all_cost(4, 10**6, 2e-5, 1e-9))


def test_one_to_all_trace_shows_the_sends_back_to_back():
    result = run_spmd(fully_connected(3, 0.0, 1e6), one_to_all, 10**6)
    sends = [s for s in result.trace if s.kind == "send"]
    assert [(s.name, s.start, s.end) for s in sends] == [("send 0->1", 0.0, 1.0),
                                                          ("send 0->2", 1.0, 2.0)]
