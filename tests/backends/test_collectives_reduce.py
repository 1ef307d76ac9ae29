"""Our reduces equal ``dist.reduce`` on the root at every world size 1–8, count, dtype, op
(SUM, MAX, MIN; AVG against SUM / p) and root."""

import torch.distributed as dist

from backends.collectives import reduce
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

ALGORITHMS = {name: getattr(reduce, name) for name in (
    "linear_reduce", "binomial_reduce", "rabenseifner_reduce")}
DRAW = {"rooted": True, "ops": ("SUM", "MAX", "MIN", "AVG")}


def check(case: Case, team: Team) -> None:
    x = make_input(case, case.count)
    ours, ref = x.clone(), x.clone()
    ALGORITHMS[case.algorithm](ours, team.root, OPS[case.op], group=team.group)
    dist.reduce(ref, team.root, builtin_op(case), group=team.pg)
    if dist.get_rank() == team.root:
        assert_same(ours, builtin_finish(ref, case, team), case, "the root's result")


def test_every_reduce_equals_torch_at_any_world_count_dtype_op_and_root():
    assert_module_passes("reduce")
