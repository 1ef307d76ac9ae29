"""Grading exercise 19.3: the exactly-once rule — against the twin's ParameterServer on
recorded update streams, and plugged into real ps tasks and the real coordinator while a
worker process is killed in the middle of a closure."""

import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.tf_distribute.ps_strategy import (
    LocalCluster,
    ParameterServer,
    ParameterServerStrategy,
)
from exercises import load
from tests.exercises.ch19_ranks import (
    GradedCoordinator,
    InProcessPs,
    StudentParameterServer,
    counted_step,
)
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch19, pytest.mark.ex19_3]


def todo(function):
    return (f"{function} is not implemented yet: write it in exercises/ch19_retry.py "
            "(EXERCISE 19.3), then run `make grade EX=19.3` again")


def student(function):
    """The student's ``function``, after a first call shows it is written."""
    probes = {"apply_once": (set(), None), "closures_to_retry": ({}, 0)}
    call_or_fail("ch19_retry", function, todo(function), *probes[function])
    return getattr(load("ch19_retry"), function)


TOKENS = st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(1, 3)))


@settings(max_examples=80)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), TOKENS, st.integers(-3, 3)),
                max_size=30))
def test_a_ps_with_your_rule_answers_as_the_twins(updates):
    """Each update ``(variable, token, amount)``: the same answers and final values."""
    theirs, yours = ParameterServer(), StudentParameterServer(student("apply_once"))
    for ps in (theirs, yours):
        for name in ("a", "b"):
            ps.handle(("create", name, torch.zeros(2, 1)))
    for name, token, amount in updates:
        delta = torch.full((2, 1), float(amount))
        expected = theirs.handle(("add", name, delta, token))
        got = yours.handle(("add", name, delta, token))
        assert got == expected, (f"update of {name!r} with token {token} after {updates}: "
                                 f"you {'apply' if got else 'skip'} it, the twin "
                                 f"{'applies' if expected else 'skips'} it")
    for name in ("a", "b"):
        assert torch.equal(yours.handle(("read", name)), theirs.handle(("read", name)))


def test_a_retry_repeats_only_what_landed():
    apply_once = student("apply_once")
    applied = set()
    first_attempt = [apply_once(applied, (5, 1))]  # killed before its update 2
    retry = [apply_once(applied, (5, 1)), apply_once(applied, (5, 2))]
    assert (first_attempt, retry) == ([True], [False, True])
    assert applied == {(5, 1), (5, 2)}
    assert apply_once(applied, None) and apply_once(applied, None)  # never from a closure
    assert applied == {(5, 1), (5, 2)}


RECORDED = [  # (in flight: closure → worker, in the order sent; dead worker; to retry)
    ({3: 0, 4: 1}, 1, [4]),
    ({3: 0, 4: 1}, 2, []),
    ({}, 0, []),
    ({7: 2, 5: 0, 9: 2, 8: 1, 11: 2}, 2, [7, 9, 11]),  # a worker with several in flight
    ({12: 1, 10: 1}, 1, [12, 10]),  # the order sent, not the ids' order
]


@pytest.mark.parametrize(("in_flight", "dead", "expected"), RECORDED)
def test_closures_to_retry_on_recorded_states(in_flight, dead, expected):
    before = dict(in_flight)
    got = student("closures_to_retry")(in_flight, dead)
    assert list(got) == expected, f"worker {dead} lost with {in_flight} in flight: you {got}"
    assert in_flight == before, "closures_to_retry changed in_flight"


CLOSURES = 10
PAUSE_S = 0.1


def _wait_running(coordinator, worker, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker in coordinator.running:
            return coordinator.running[worker]
        time.sleep(0.005)
    raise AssertionError(f"worker {worker} never started a closure")


def test_a_killed_worker_loses_nothing_and_doubles_nothing():
    apply_once, closures_to_retry = student("apply_once"), student("closures_to_retry")
    with LocalCluster(num_workers=2, num_ps=1) as cluster, \
            InProcessPs(2, cluster.authkey, apply_once) as ps:
        counter = ps.variable("attempts", torch.zeros(1, 1))
        ledger = ps.variable("ledger", torch.zeros(CLOSURES, 1))
        with GradedCoordinator(ParameterServerStrategy(cluster), closures_to_retry) as coord:
            values = [coord.schedule(counted_step, (counter, ledger, k, PAUSE_S))
                      for k in range(CLOSURES)]
            victim = _wait_running(coord, worker=1)
            time.sleep(PAUSE_S / 3)  # inside the pause: its first update has landed
            cluster.kill_worker(1)
            try:
                coord.join(timeout_s=10)
            except TimeoutError:
                pytest.fail(f"worker 1 was killed running closure {victim}; closures "
                            f"{sorted(set(range(CLOSURES)) - set(coord.completions))} never "
                            "completed (were they put back on the queue?)", pytrace=False)
            assert coord.fetch(values) == list(range(CLOSURES))
            completions = dict(coord.completions)
            attempts = coord.closures[victim].attempts
        ledger_rows = ledger.read_value().flatten().tolist()
        counted = counter.read_value().item()
    assert completions == dict.fromkeys(range(CLOSURES), 1), (
        f"closure → completions {completions}: each must complete exactly once")
    assert attempts == [1, 0], f"closure {victim} ran on workers {attempts}"
    assert ledger_rows == [1.0] * CLOSURES, f"ledger {ledger_rows}"
    assert counted == CLOSURES, (
        f"{CLOSURES} closures, each adding 1 once, made the counter {counted}: the killed "
        f"attempt's update and its retry's repeat were both applied")
