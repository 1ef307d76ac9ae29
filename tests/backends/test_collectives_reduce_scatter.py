"""Our reduce-scatters equal this rank's slice of ``dist.all_reduce`` (gloo has no
``reduce_scatter_tensor``) at every world size 1–8, count, dtype and op; the input is untouched."""

import torch
import torch.distributed as dist

from backends.collectives import reduce_scatter
from tests.backends.reducing import DRAW_OPS, assert_reduced, reduce_ops
from tests.backends.test_collectives_harness import (
    Case,
    Team,
    assert_module_passes,
    assert_same,
    make_input,
)

ALGORITHMS = {name: getattr(reduce_scatter, name) for name in (
    "ring_reduce_scatter", "recursive_halving_reduce_scatter", "pairwise_reduce_scatter")}
DRAW = {"ops": DRAW_OPS}


def check(case: Case, team: Team) -> None:
    k = case.count
    whole = make_input(case, team.size * k)
    kept = whole.clone()
    ours = torch.empty(k, dtype=whole.dtype)
    op, builtin = reduce_ops(case)
    ALGORITHMS[case.algorithm](ours, whole, op, group=team.group)
    ref = whole.clone()
    dist.all_reduce(ref, builtin, group=team.pg)
    assert_reduced(ours, ref[team.rank * k:(team.rank + 1) * k], case, team, "this rank's piece")
    assert_same(whole, kept, case, "the input")


def test_every_reduce_scatter_equals_torch_at_any_world_count_dtype_and_op():
    assert_module_passes("reduce_scatter")
