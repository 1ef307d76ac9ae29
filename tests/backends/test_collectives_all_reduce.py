"""Our seven all-reduces equal ``dist.all_reduce`` at every world size 1–8, count, dtype and op
(SUM, MAX, MIN; AVG against SUM / p); the traced ring records the spans of its steps."""

from collections import Counter

import torch.distributed as dist
from hypothesis import strategies as st

from backends.collectives import all_reduce
from backends.trace import Tracer
from tests.backends.reducing import DRAW_OPS, assert_reduced, reduce_ops
from tests.backends.test_collectives_harness import (
    WORLD,
    Case,
    Team,
    assert_module_passes,
    make_input,
)

ALGORITHMS = {name: getattr(all_reduce, name) for name in (
    "reduce_broadcast_all_reduce", "ring_all_reduce", "recursive_doubling_all_reduce",
    "rabenseifner_all_reduce", "binary_tree_all_reduce", "double_binary_tree_all_reduce",
    "hierarchical_all_reduce")}
DRAW = {"ops": DRAW_OPS,
        "params": {"hierarchical_all_reduce": st.integers(1, WORLD + 1)}}  # ranks per node


def check(case: Case, team: Team) -> None:
    x = make_input(case, case.count)
    ours, ref = x.clone(), x.clone()
    op, builtin = reduce_ops(case)
    tracer = Tracer() if case.algorithm == "ring_all_reduce" else None
    if case.algorithm == "hierarchical_all_reduce":
        all_reduce.hierarchical_all_reduce(ours, case.param, op, group=team.group)
    else:
        ALGORITHMS[case.algorithm](ours, op, group=team.group, tracer=tracer)
    dist.all_reduce(ref, builtin, group=team.pg)
    assert_reduced(ours, ref, case, team, "the result")
    if tracer is not None:
        check_ring_spans(tracer, team)


def check_ring_spans(tracer: Tracer, team: Team) -> None:
    """p − 1 reduce-scatter steps (send, recv, reduce) and p − 1 all-gather steps (send, recv),
    each message to the right neighbour and from the left one, named by global ranks."""
    p, me = team.size, team.ranks[team.rank]
    right, left = team.ranks[(team.rank + 1) % p], team.ranks[(team.rank - 1) % p]
    kinds = Counter((s.kind, s.name) for s in tracer.trace)
    expected = Counter({("send", f"send {me}->{right}"): 2 * (p - 1),
                        ("recv", f"recv {left}->{me}"): 2 * (p - 1),
                        ("reduce", "reduce"): p - 1})
    assert kinds == +expected, f"ring spans {dict(kinds)} != {dict(+expected)}"
    assert all(s.rank == me and s.end >= s.start for s in tracer.trace)


def test_every_all_reduce_equals_torch_at_any_world_count_dtype_and_op():
    assert_module_passes("all_reduce")
