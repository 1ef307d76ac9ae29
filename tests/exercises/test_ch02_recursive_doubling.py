"""Grading exercise 2.1: recursive-doubling all-reduce on real processes, against dist.all_reduce.

Run with ``make grade CH=02`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch02
tests/exercises`` (the reference answer).

Each world size is launched once per module (a module-scoped cache): its ranks run every case
and report, and the tests read the reports. Inside the ranks the code under test may send only
point-to-point messages; they are counted, and the counts are compared with the messages the
simulated twin sends. The helpers, shared with exercise 2.2's grading, are in ``grading.py``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from simulator.collectives.all_reduce import recursive_doubling_all_reduce as simulated_twin
from tests.exercises.grading import (
    CASES,
    Launches,
    graded,
    is_todo,
    mismatch,
    run_cases,
    traffic_differences,
    wrong_results,
)

pytestmark = [pytest.mark.ch02, pytest.mark.ex02_1]

TODO = ("recursive_doubling_all_reduce is not implemented yet: write it in "
        "exercises/ch02_recursive_doubling.py (EXERCISE 2.1: lg p swaps of the whole buffer "
        "with rank XOR d), then run `make grade CH=02` again")


def run_recursive_doubling(cases: tuple[tuple[str, int, str], ...]) -> Any:
    """Rank function: the function under test on every case, beside ``dist.all_reduce``."""
    return run_cases("EXERCISE 2.1", "ch02_recursive_doubling", "recursive_doubling_all_reduce",
                     cases, whole_buffer)


def whole_buffer(label: str, tensor: Any, reference: Any, returned: Any) -> tuple[str, str | None]:
    """The case's report line, and where the whole buffer differs from ``dist.all_reduce``'s."""
    return label, mismatch(tensor, reference, returned)


@pytest.fixture(scope="module")
def run() -> Launches:
    """``run(world)``: the reports of one launch on ``world`` ranks."""
    return Launches(run_recursive_doubling, CASES)


# ---- the grading ------------------------------------------------------------------------------

@pytest.mark.parametrize("world", [1, 2, 4])
def test_every_rank_ends_with_what_dist_all_reduce_gives(run, world):
    wrong = wrong_results(graded(run(world), world, TODO))
    assert not wrong, f"on {world} ranks: " + "; ".join(wrong[:3])


@pytest.mark.parametrize("world", [2, 4])
def test_sends_the_messages_of_the_simulated_twin(run, world):
    reports = graded(run(world), world, TODO)
    differences = traffic_differences(reports, simulated_twin, CASES)
    assert not differences, (
        f"on {world} ranks recursive doubling sends lg p = {int(math.log2(world))} messages of "
        "the whole buffer per rank: " + "; ".join(differences[:3]))


@pytest.mark.parametrize("world", [3, 5])
def test_stretch_any_number_of_ranks(run, world):
    outcome = run(world)
    if is_todo(outcome):
        if is_todo(run(2)):
            pytest.fail(TODO, pytrace=False)
        pytest.skip(f"stretch not attempted: recursive_doubling_all_reduce raises "
                    f"NotImplementedError on {world} ranks (fold first, textbook eq-fold)")
    wrong = wrong_results(graded(outcome, world, TODO))
    assert not wrong, f"on {world} ranks (the fold): " + "; ".join(wrong[:3])
