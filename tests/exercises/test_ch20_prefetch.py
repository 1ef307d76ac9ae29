"""Grading exercise 20.3: the order in which FSDP issues its all-gathers, against the log the
lab's real FSDP (:class:`backends.fsdp.FSDP`, :attr:`~backends.fsdp.FSDP.log`) keeps on 2
processes, for 3 and 4 units and every ``(reshard_after_forward, prefetch)``.

Run with ``make grade EX=20.3`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex20_3
tests/exercises`` (the reference answer).
"""

import itertools

import pytest

from backends.launch import spawn
from tests.exercises import ch20_ranks
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch20, pytest.mark.ex20_3]

TODO = ("gather_order is not implemented yet: write it in exercises/ch20_prefetch.py "
        "(EXERCISE 20.3), then run `make grade EX=20.3` again")

CONFIGS = list(itertools.product((True, False), (True, False)))
MODELS = {3: (4, 7, 5, 3), 4: (4, 6, 5, 7, 3)}
"""Widths of :func:`lab.models.mlp` with 3 and 4 ``Linear`` units."""

_logs: dict[int, list] = {}


def order(*args):
    return call_or_fail("ch20_prefetch", "gather_order", TODO, *args)


def real_logs(units):
    """Both ranks' logs of a step of the real FSDP over ``units`` units, per config (one
    launch per unit count, shared by the tests)."""
    if units not in _logs:
        _logs[units] = spawn(ch20_ranks.logs, 2, MODELS[units], CONFIGS, timeout=60,
                             deadline=120)
    return _logs[units]


def test_one_unit_without_prefetching_by_hand():
    assert order(1, True, False) == [("gather", 0), ("forward", 0), ("gather", 0),
                                     ("backward", 0)]


@pytest.mark.parametrize("units", [3, 4])
@pytest.mark.parametrize(("reshard", "prefetch"), CONFIGS)
def test_equals_the_real_fsdps_log(units, reshard, prefetch):
    mine = order(units, reshard, prefetch)  # a stub fails here, before any process starts
    for rank, logs in enumerate(real_logs(units)):
        real = [tuple(event) for event in logs[(reshard, prefetch)]]
        assert mine == real, (f"{units} units, reshard_after_forward={reshard}, "
                              f"prefetch={prefetch}: you say {mine}, rank {rank} of the real "
                              f"FSDP logged {real}")


@pytest.mark.parametrize("units", [2, 5, 9])
def test_every_unit_is_gathered_before_it_computes(units):
    for reshard, prefetch in CONFIGS:
        log = order(units, reshard, prefetch)
        gathers = [i for kind, i in log if kind == "gather"]
        assert len(gathers) == units * (2 if reshard else 1), (units, reshard, prefetch, log)
        for k, (kind, i) in enumerate(log):
            if kind != "gather":
                assert ("gather", i) in log[:k], (units, reshard, prefetch, log)


def test_no_units_raises_value_error():
    with pytest.raises(ValueError):
        order(0, True, True)
