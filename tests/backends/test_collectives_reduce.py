"""Our reduces equal ``dist.reduce`` on the root at every world size 1–8, count, dtype, op
(SUM, MAX, MIN; AVG against SUM / p) and root."""

import torch.distributed as dist

from backends.collectives import reduce
from tests.backends.reducing import DRAW_OPS, assert_reduced, reduce_ops
from tests.backends.test_collectives_harness import Case, Team, assert_module_passes, make_input

ALGORITHMS = {name: getattr(reduce, name) for name in (
    "linear_reduce", "binomial_reduce", "rabenseifner_reduce")}
DRAW = {"rooted": True, "ops": DRAW_OPS}


def check(case: Case, team: Team) -> None:
    x = make_input(case, case.count)
    ours, ref = x.clone(), x.clone()
    op, builtin = reduce_ops(case)
    ALGORITHMS[case.algorithm](ours, team.root, op, group=team.group)
    dist.reduce(ref, team.root, builtin, group=team.pg)
    if dist.get_rank() == team.root:
        assert_reduced(ours, ref, case, team, "the root's result")


def test_every_reduce_equals_torch_at_any_world_count_dtype_op_and_root():
    assert_module_passes("reduce")
