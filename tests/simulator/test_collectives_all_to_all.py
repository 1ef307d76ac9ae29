"""All-to-all: pairwise peers, Bruck's half-the-pieces steps, and the latency-vs-bandwidth
trade between them."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.all_to_all import bruck_all_to_all, pairwise_all_to_all
from simulator.core import run_spmd
from tests.simulator.collective_helpers import fully_connected, sends_by_step


def test_pairwise_pairs_ranks_by_xor_for_a_power_of_two():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), pairwise_all_to_all, 4 * 40)
    pairs = [sorted({tuple(sorted(name.split("->"))) for name, _ in step})
             for step in sends_by_step(result)]
    assert pairs == [[("0", "1"), ("2", "3")], [("0", "2"), ("1", "3")],
                     [("0", "3"), ("1", "2")]]


def test_pairwise_shifts_for_other_worlds():
    result = run_spmd(fully_connected(3, alpha=1.0, bw=1e15), pairwise_all_to_all, 4 * 30)
    steps = [[name for name, _ in step] for step in sends_by_step(result)]
    assert steps == [["0->1", "1->2", "2->0"], ["0->2", "1->0", "2->1"]]


def test_bruck_moves_half_the_pieces_each_step():
    result = run_spmd(fully_connected(8, alpha=1.0, bw=1e15), bruck_all_to_all, 4 * 8 * 10)
    assert [{n for _, n in step} for step in sends_by_step(result)] == [{160}] * 3
    assert [name for name, _ in sends_by_step(result)[1]][:2] == ["0->2", "1->3"]


@given(p=st.integers(1, 9), count=st.integers(0, 300))
def test_pairwise_sends_every_piece_but_its_own_once(p, count):
    result = run_spmd(fully_connected(p), pairwise_all_to_all, 4 * count, trace=False)
    assert result.total_bytes == (p - 1) * 4 * count


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_bruck_sends_more_bytes_in_fewer_messages(p):
    n = 4 * p * 25
    bruck = run_spmd(fully_connected(p), bruck_all_to_all, n, trace=False)
    assert bruck.total_bytes == p * n // 2 * (p.bit_length() - 1)  # n/2 per rank per step


def test_bruck_wins_short_messages_and_pairwise_long_ones():
    c = fully_connected(16, alpha=1e-5, bw=1e10)

    def t(program, n):
        return run_spmd(c, program, n, trace=False).makespan_s

    assert t(bruck_all_to_all, 1024) < t(pairwise_all_to_all, 1024)
    assert t(bruck_all_to_all, 2**24) > t(pairwise_all_to_all, 2**24)
