"""Reduce: the binomial and Rabenseifner tables, where the reductions happen, the fold with a
root that sits out, and the root's shared port."""

from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.reduce import (
    binomial_reduce,
    linear_reduce,
    linear_reduce_cost,
    rabenseifner_reduce,
)
from simulator.core import Device, Link, Topology, run_spmd
from tests.simulator import collective_helpers as helpers
from tests.simulator.collective_helpers import sends_by_step

DEV = Device("test", flops_per_s=1e12, mem_bandwidth_Bps=9e18, memory_bytes=1e9)  # reductions ~free
cluster = partial(helpers.cluster, device=DEV)
fully_connected = partial(helpers.fully_connected, device=DEV)


def reduced_bytes(result):
    """Bytes each rank combined."""
    out: dict[int, int] = {}
    for s in result.trace:
        if s.kind == "reduce":
            out[s.rank] = out.get(s.rank, 0) + s.nbytes
    return out


def test_binomial_reduce_follows_the_docstring_table():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), binomial_reduce, 64)
    assert sends_by_step(result) == [[("1->0", 64), ("3->2", 64)], [("2->0", 64)]]
    assert reduced_bytes(result) == {0: 128, 2: 64}


def test_rabenseifner_reduce_halves_then_gathers_as_in_the_docstring():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), rabenseifner_reduce, 4 * 400)
    assert sends_by_step(result) == [
        [("0->2", 800), ("1->3", 800), ("2->0", 800), ("3->1", 800)],  # halving, d = 2
        [("0->1", 400), ("1->0", 400), ("2->3", 400), ("3->2", 400)],  # halving, d = 1
        [("1->0", 400), ("3->2", 400)],                                # gather, d = 1
        [("2->0", 800)]]                                               # gather, d = 2
    assert reduced_bytes(result) == {r: 800 + 400 for r in range(4)}


@pytest.mark.parametrize("dst", [0, 1, 3, 4, 5])
def test_rabenseifner_reduce_hands_the_result_to_a_root_that_sat_out(dst):
    n = 4 * 600
    result = run_spmd(fully_connected(6, alpha=1.0, bw=1e15), rabenseifner_reduce, n, dst=dst)
    last = [s for s in result.trace if s.kind == "send"][-1]
    if dst in (1, 3):  # odd ranks below 2·extra = 4 fold into dst - 1
        assert last.name == f"send {dst - 1}->{dst}" and last.nbytes == n
    assert result.finish_s[dst] == result.makespan_s


@given(p=st.integers(2, 9), dst=st.integers(0, 8))
def test_linear_reduce_has_the_root_combine_every_other_buffer(p, dst):
    result = run_spmd(fully_connected(p), linear_reduce, 400, dst=dst % p)
    assert reduced_bytes(result) == {dst % p: (p - 1) * 400}


def test_linear_reduce_latencies_overlap_until_the_roots_port_is_shared():
    p, n, alpha, bw = 8, 2**20, 1e-5, 1e9
    direct = run_spmd(fully_connected(p, alpha, bw, "fair"), linear_reduce, n).makespan_s
    switch = run_spmd(cluster(Topology.switch(p, Link(alpha, bw, "fair"))), linear_reduce,
                      n).makespan_s
    gamma = DEV.gamma_s_per_B
    assert direct == pytest.approx(linear_reduce_cost(p, n, alpha, 1 / bw, gamma))
    assert switch > direct


def test_rabenseifner_beats_binomial_reduce_for_long_messages_only():
    def t(program, n):
        return run_spmd(fully_connected(16), program, n, trace=False).makespan_s

    assert t(rabenseifner_reduce, 256) > t(binomial_reduce, 256)
    assert t(rabenseifner_reduce, 2**24) < t(binomial_reduce, 2**24)
