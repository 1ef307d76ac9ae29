"""The simulated runtime step: a partitioned graph's Sends, Recvs and gradients cost what the
α-β links charge, on top of each task's profiled compute, and mismatched pairs are refused."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.tf_runtime import (
    ENVELOPE_BYTES,
    HEADER_BYTES,
    SimOp,
    SimPartition,
    check_pairs,
    compute_s,
    simulate_graph_step,
    step_bytes,
)


def cluster(world: int, alpha_s: float, bandwidth_Bps: float) -> Cluster:
    device = Device("cpu", 1e9, 1e10, math.inf)
    return Cluster.homogeneous("test", device, Topology.fully_connected(
        world, Link(alpha_s, bandwidth_Bps, "none")))


def two_tasks(fa: float, fc: float, bc: float, nbytes: int) -> list[SimPartition]:
    """Task 0 computes A and sends its output to task 1, which computes C on it."""
    return [SimPartition((SimOp("node", "A", fa, 0.0),
                          SimOp("send", "send_A", peer=1, nbytes=nbytes, tag=1, grad=True))),
            SimPartition((SimOp("recv", "recv_A", peer=0, nbytes=nbytes, tag=1, grad=True),
                          SimOp("node", "C", fc, bc)))]


@settings(max_examples=20)
@given(st.floats(1e-6, 1e-2), st.floats(1e-6, 1e-2), st.floats(1e-6, 1e-2),
       st.floats(1e-6, 1e-3), st.floats(1e7, 1e10), st.integers(4, 1 << 20))
def test_two_tasks_cost_the_chain_of_messages_and_compute(fa, fc, bc, alpha, bw, nbytes):
    # request (header + payload), tensor there, gradient back, reply (header + payload)
    control = 2 * (2 * alpha + (HEADER_BYTES + ENVELOPE_BYTES) / bw)
    want = fa + fc + bc + 2 * (alpha + nbytes / bw) + control
    got = simulate_graph_step(cluster(2, alpha, bw), two_tasks(fa, fc, bc, nbytes)).makespan_s
    assert got == pytest.approx(want, rel=1e-9)


def skip_graph(f: float, nbytes: int) -> list[SimPartition]:
    """Three tasks: 0's output goes to 1 and around it to 2; 1's output goes to 2."""
    return [
        SimPartition((SimOp("node", "a", f, 2 * f),
                      SimOp("send", "a_to_1", peer=1, nbytes=nbytes, tag=1, grad=True),
                      SimOp("send", "a_to_2", peer=2, nbytes=nbytes, tag=3, grad=True)), f),
        SimPartition((SimOp("recv", "a_from_0", peer=0, nbytes=nbytes, tag=1, grad=True),
                      SimOp("node", "b", f, 2 * f),
                      SimOp("send", "b_to_2", peer=2, nbytes=nbytes, tag=5, grad=True)), f),
        SimPartition((SimOp("recv", "b_from_1", peer=1, nbytes=nbytes, tag=5, grad=True),
                      SimOp("recv", "a_from_0", peer=0, nbytes=nbytes, tag=3, grad=True),
                      SimOp("node", "add_c", f, 2 * f),
                      SimOp("recv", "y_from_0", peer=0, nbytes=8, tag=7, grad=False)), f),
    ]


def test_a_skip_connection_runs_without_deadlock_and_serialises_the_tasks():
    parts = skip_graph(1e-3, 1000)
    parts[0] = SimPartition((*parts[0].ops, SimOp("send", "y", peer=2, nbytes=8, tag=7)),
                            parts[0].update_s)
    free = simulate_graph_step(cluster(3, 0.0, 1e18), parts).makespan_s
    # forward a, b, c then backward c, b, a: the critical path, plus the last update
    assert free == pytest.approx(3 * 1e-3 + 3 * 2e-3 + 1e-3)
    slow = simulate_graph_step(cluster(3, 1e-4, 1e9), parts).makespan_s
    assert slow > free + 4 * 1e-4  # at least a→b, b→c forward and back


def test_bytes_and_compute_per_task():
    parts = skip_graph(1e-3, 1000)
    assert step_bytes(parts) == [2000, 2000, 2000]
    assert compute_s(parts) == pytest.approx([4e-3, 4e-3, 4e-3])


def test_a_send_without_its_recv_is_refused():
    with pytest.raises(ValueError, match="no match"):
        check_pairs(skip_graph(1e-3, 1000))  # y is received, never sent
    parts = two_tasks(1e-3, 1e-3, 1e-3, 100)
    parts[1] = SimPartition((SimOp("recv", "r", peer=0, nbytes=99, tag=1, grad=True),))
    with pytest.raises(ValueError, match="disagree"):
        check_pairs(parts)


def test_partitions_and_ranks_must_agree():
    with pytest.raises(ValueError, match="2 partitions need 2 ranks"):
        simulate_graph_step(cluster(3, 0.0, 1e9), two_tasks(1e-3, 1e-3, 1e-3, 8))
