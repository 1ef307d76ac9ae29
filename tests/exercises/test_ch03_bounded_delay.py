"""Grading exercise 3.1: the bounded-delay wait, with a recording stand-in and on real ranks."""

import pytest

from exercises import load
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch03, pytest.mark.ex03_1]

TODO = ("bounded_delay_wait is not implemented yet: write it in exercises/ch03_bounded_delay.py "
        "(EXERCISE 3.1), then run `make grade CH=03` again")


class Recorder:
    """Stands in for a KVWorker: records the clocks asked for and the waits."""

    def __init__(self):
        self.asked, self.waited = [], []

    def clock(self, c):
        self.asked.append(c)
        return 100 + c

    def wait(self, ts):
        self.waited.append(ts)
        return ts


@pytest.mark.parametrize("tau", [0, 1, 3])
def test_asks_for_clock_t_minus_tau_and_waits_for_it(tau):
    for t in range(8):
        kv = Recorder()
        call_or_fail("ch03_bounded_delay", "bounded_delay_wait", TODO, kv, t, tau)
        expected = [t - tau] if t - tau > 0 else []
        assert kv.asked == expected, f"t={t}, τ={tau}: asked for clocks {kv.asked}"
        assert kv.waited == [100 + c for c in expected], f"t={t}, τ={tau}: waited {kv.waited}"


def test_real_ssp_run_keeps_staleness_within_tau():
    from backends.launch import RankError
    from backends.parameter_server import PSConfig, train

    call_or_fail("ch03_bounded_delay", "bounded_delay_wait", TODO, Recorder(), 0, 0)
    tau = 2
    cfg = PSConfig(servers=1, workers=2, consistency="ssp", tau=tau, iterations=16,
                   straggler_mean_s=0.005)
    try:
        result = train(cfg, load("ch03_bounded_delay").bounded_delay_wait, timeout=20)
    except RankError as exc:
        pytest.fail(f"the SSP run with your wait failed: {str(exc).splitlines()[0]}",
                    pytrace=False)
    staleness = [s for w in result.workers for s in w["staleness"]]
    assert max(staleness) <= tau, f"staleness {max(staleness)} exceeds τ = {tau}"
    assert max(staleness) == tau, "the fast worker never ran τ ahead: do you wait too long?"
