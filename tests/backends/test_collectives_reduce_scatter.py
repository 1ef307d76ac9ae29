"""Our reduce-scatters equal this rank's slice of ``dist.all_reduce`` (gloo has no
``reduce_scatter_tensor``) at every world size 1–8, count, dtype and op; the input is untouched."""

import torch
import torch.distributed as dist

from backends.collectives import reduce_scatter
from tests.backends.test_collectives_harness import (
    OPS,
    Case,
    Team,
    assert_module_passes,
    assert_same,
    builtin_finish,
    builtin_op,
    make_input,
)

ALGORITHMS = {name: getattr(reduce_scatter, name) for name in (
    "ring_reduce_scatter", "recursive_halving_reduce_scatter", "pairwise_reduce_scatter")}
DRAW = {"ops": ("SUM", "MAX", "MIN", "AVG")}


def check(case: Case, team: Team) -> None:
    k = case.count
    whole = make_input(case, team.size * k)
    kept = whole.clone()
    ours = torch.empty(k, dtype=whole.dtype)
    ALGORITHMS[case.algorithm](ours, whole, OPS[case.op], group=team.group)
    ref = whole.clone()
    dist.all_reduce(ref, builtin_op(case), group=team.pg)
    mine = builtin_finish(ref[team.rank * k:(team.rank + 1) * k], case, team)
    assert_same(ours, mine, case, "this rank's piece")
    assert_same(whole, kept, case, "the input")


def test_every_reduce_scatter_equals_torch_at_any_world_count_dtype_and_op():
    assert_module_passes("reduce_scatter")
