"""Grading exercise 3.3: the number of servers at which the bottleneck moves.

Graded by the simulator: :func:`simulator.parameter_server.bottleneck_sweep` runs BSP on a
dense model over a switch whose server ports and worker ports have the given speeds, with
PS-Lite's queued (ZeroMQ) van — sends are handed to the network and the sender goes on — so
the ports are the only limit. Your ``S*`` must be where the simulated time per iteration stops
falling: at ``S*`` it is already at its floor (the workers' ports), one server fewer it is not.
The NIC inequality is checked too, over many random cases.

This lab's own van (gloo: blocking sends, one receiving thread per node) behaves differently —
extra servers keep helping past ``S*`` and server bandwidth above a worker's buys nothing; see
``test_the_lab_van_keeps_helping_past_the_nic_crossover`` in
``tests/simulator/test_parameter_server.py`` and notebook 03.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.parameter_server import bottleneck_sweep
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch03, pytest.mark.ex03_3]

TODO = ("servers_where_bottleneck_moves is not implemented yet: write it in "
        "exercises/ch03_bottleneck.py (EXERCISE 3.3), then run `make grade CH=03` again")
MODEL_BYTES = 40e6


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


@pytest.mark.parametrize("workers,server_Bps,worker_Bps", [
    (8, 10e9, 10e9), (8, 40e9, 10e9), (4, 10e9, 20e9), (3, 1e9, 1e9 / 3), (5, 3e9, 7e9),
    (6, 10e9, 4e9), (1, 1e9, 1e9)])
def test_the_simulated_time_per_iteration_stops_falling_at_your_answer(workers, server_Bps,
                                                                       worker_Bps):
    s = answer(workers, server_Bps, worker_Bps)
    assert isinstance(s, int) and s >= 1
    before, at, beyond = bottleneck_sweep(workers, server_Bps, worker_Bps, MODEL_BYTES,
                                          [max(s - 1, 1), s, s + 3])
    assert at <= beyond * 1.001, (f"with {s} servers the simulated iteration takes "
                                  f"{at * 1e3:.2f} ms, but more servers bring it down to "
                                  f"{beyond * 1e3:.2f} ms: the servers are still the bottleneck")
    if s > 1:
        assert before > beyond * 1.01, (f"{s - 1} servers are already as fast as {s} "
                                        f"({before * 1e3:.2f} ms): the bottleneck moved earlier")
