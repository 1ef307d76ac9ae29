"""What the reducing collectives' tests (reduce, reduce-scatter, all-reduce) share on top of the
harness: the ops they draw, the op each side gets, and the comparison with the built-in."""

from typing import Any

import torch

from tests.backends.test_collectives_harness import (
    OPS,
    Case,
    Team,
    assert_same,
    builtin_finish,
    builtin_op,
)

DRAW_OPS = ("SUM", "MAX", "MIN", "AVG")
"""The ops a reducing collective's cases are drawn with (the harness draws AVG for floats only)."""


def reduce_ops(case: Case) -> tuple[Any, Any]:
    """(the op our algorithm gets, the op PyTorch's built-in gets: SUM in place of AVG)."""
    return OPS[case.op], builtin_op(case)


def assert_reduced(ours: torch.Tensor, ref: torch.Tensor, case: Case, team: Team,
                   what: str) -> None:
    """``ours`` equals the built-in's ``ref``, turned from SUM into AVG where ``case`` asks."""
    assert_same(ours, builtin_finish(ref, case, team), case, what)
