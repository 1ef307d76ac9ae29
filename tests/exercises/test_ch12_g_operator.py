"""Grading exercise 12.3: Megatron's g operator (all-reduce forward, identity backward), on
real processes (worlds 2 and 3, one spawn each).

Run with ``make grade CH=12`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch12
tests/exercises`` (the reference answer).
"""

import pytest

from backends.launch import spawn
from tests.exercises import ch12_ranks

pytestmark = [pytest.mark.ch12, pytest.mark.ex12_3, pytest.mark.timeout(120)]

TODO = ("GOperator is not implemented yet: write forward and backward in "
        "exercises/ch12_g_operator.py (EXERCISE 12.3), then run `make grade CH=12` again")
ATOL = 1e-12


@pytest.fixture(scope="module", params=[2, 3], ids=lambda w: f"world{w}")
def graded(request):
    world = request.param
    per_rank = spawn(ch12_ranks.grade_g, world, timeout=20, deadline=90)
    if any("todo" in r for r in per_rank):
        pytest.fail(TODO, pytrace=False)
    return world, per_rank


def _check(graded, keys, what):
    world, per_rank = graded
    for rank, got in enumerate(per_rank):
        for key in keys:
            assert got[key] < ATOL, (f"world {world}, rank {rank}: {what} ({key}) is off by "
                                     f"{got[key]:.3g}")


def test_forward_sums_every_ranks_input(graded):
    _check(graded, ["forward"], "g's forward must all-reduce (SUM) over the ranks")
    _check(graded, ["input_unchanged"], "g must not change its input in place")


def test_backward_is_the_identity(graded):
    _check(graded, ["backward"], "g's backward must pass the gradient through unchanged "
                                 "(no all-reduce)")


def test_row_parallel_linear_on_g_equals_the_unsharded_linear(graded):
    _check(graded, ["row_parallel_output", "row_parallel_input_grad",
                    "row_parallel_weight_grad"],
           "a row-parallel linear built on g must equal F.linear on the whole tensors")
