"""Grading exercise 3.3: the number of servers at which the bottleneck moves.

Graded against the NIC inequality only. The simulated twin of *this lab's* van does not stop
improving at S*: its servers handle requests on one thread and its sends are blocking
rendezvous, so receive and send do not overlap and workers queue server by server — a measured
limit of our transport that notebook 03 shows, not the bandwidth bound of the exercise.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.exercises.grading import call_or_fail

pytestmark = pytest.mark.ch03

TODO = ("servers_where_bottleneck_moves is not implemented yet: write it in "
        "exercises/ch03_bottleneck.py (EXERCISE 3.3), then run `make grade CH=03` again")


def answer(workers, server_Bps, worker_Bps):
    return call_or_fail("ch03_bottleneck", "servers_where_bottleneck_moves", TODO, workers,
                        server_Bps, worker_Bps)


@given(w=st.integers(1, 64), bs=st.floats(1e8, 1e11), bw=st.floats(1e8, 1e11))
def test_servers_are_no_slower_at_your_answer_and_slower_one_server_before(w, bs, bw):
    s = answer(w, bs, bw)
    assert isinstance(s, int) and s >= 1
    assert w / (s * bs) <= 1 / bw * (1 + 1e-9)
    if s > 1:
        assert w / ((s - 1) * bs) > 1 / bw


def test_exact_ratios():
    assert answer(8, 10e9, 10e9) == 8
    assert answer(8, 40e9, 10e9) == 2
    assert answer(3, 1e9, 1e9 / 3) == 1
