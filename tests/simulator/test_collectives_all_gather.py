"""All-gather: the peers of every step, the traffic each rank receives, the fold, and the
price of Bruck's long-distance messages on a ring of links."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.all_gather import (
    bruck_all_gather,
    recursive_doubling_all_gather,
    ring_all_gather,
)
from simulator.core import Link, Topology, run_spmd
from tests.simulator.collective_helpers import cluster, fully_connected, received, sends_by_step


def test_ring_passes_one_piece_right_per_step():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), ring_all_gather, 4 * 40)
    step = [("0->1", 40), ("1->2", 40), ("2->3", 40), ("3->0", 40)]
    assert sends_by_step(result) == [step, step, step]


def test_recursive_doubling_swaps_aligned_blocks_as_in_the_docstring():
    result = run_spmd(fully_connected(4, alpha=1.0, bw=1e15), recursive_doubling_all_gather,
                      4 * 40)
    assert sends_by_step(result) == [
        [("0->1", 40), ("1->0", 40), ("2->3", 40), ("3->2", 40)],
        [("0->2", 80), ("1->3", 80), ("2->0", 80), ("3->1", 80)]]


def test_bruck_sends_its_first_pieces_left_and_finishes_in_ceil_lg_p_steps():
    result = run_spmd(fully_connected(5, alpha=1.0, bw=1e15), bruck_all_gather, 4 * 50)
    counts = [{n for _, n in step} for step in sends_by_step(result)]
    assert counts == [{40}, {80}, {40}]  # 1, 2, then the last p - 4 = 1 piece
    assert ("1->0", 40) in sends_by_step(result)[0]


def test_recursive_doubling_folds_a_non_power_of_two_world():
    # p = 6: 1 and 3 hand their piece to 0 and 2 (meanwhile 4 and 5, survivors 2 and 3,
    # already swap), the four survivors double, then 0 and 2 send everything back.
    result = run_spmd(fully_connected(6, alpha=1.0, bw=1e15), recursive_doubling_all_gather,
                      4 * 60)
    steps = sends_by_step(result)
    assert steps[0] == [("1->0", 40), ("3->2", 40), ("4->5", 40), ("5->4", 40)]
    assert steps[-1] == [("0->1", 240), ("2->3", 240)]


@pytest.mark.parametrize("program", [ring_all_gather, bruck_all_gather])
@given(p=st.integers(1, 9), count=st.integers(0, 500))
def test_every_rank_receives_every_piece_but_its_own_once(program, p, count):
    result = run_spmd(fully_connected(p), program, 4 * count)
    own = [4 * (count // p + (1 if r < count % p else 0)) for r in range(p)]
    assert received(result, p) == [4 * count - mine for mine in own]


def test_bruck_beats_the_ring_on_latency_but_not_on_a_ring_of_links():
    p, n = 8, 4 * 8 * 2**14
    link = Link(1e-6, 1e9, "fair")
    direct = cluster(Topology.fully_connected(p, link))
    ring = cluster(Topology.ring(p, link))

    def t(c, program):
        return run_spmd(c, program, n, trace=False).makespan_s

    assert t(direct, bruck_all_gather) < t(direct, ring_all_gather)
    assert t(ring, bruck_all_gather) > t(ring, ring_all_gather)
    assert t(ring, ring_all_gather) == pytest.approx(t(direct, ring_all_gather))
