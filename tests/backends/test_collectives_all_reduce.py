"""Our eight all-reduces equal ``dist.all_reduce`` at every world size 1–8, count, dtype and op
(SUM, MAX, MIN; AVG against SUM / p); the traced ring records the spans of its steps."""

from collections import Counter

import torch.distributed as dist
from hypothesis import strategies as st

from backends.collectives import all_reduce
from backends.trace import Tracer
from simulator.collectives.chunks import segment_count
from tests.backends.reducing import DRAW_OPS, assert_reduced, reduce_ops
from tests.backends.test_collectives_harness import (
    WORLD,
    Case,
    Team,
    assert_module_passes,
    make_input,
)

ALGORITHMS = {name: getattr(all_reduce, name) for name in (
    "reduce_broadcast_all_reduce", "ring_all_reduce", "segmented_ring_all_reduce",
    "recursive_doubling_all_reduce",
    "rabenseifner_all_reduce", "binary_tree_all_reduce", "double_binary_tree_all_reduce",
    "hierarchical_all_reduce")}
DRAW = {"ops": DRAW_OPS,
        "params": {"hierarchical_all_reduce": st.integers(1, WORLD + 1),  # ranks per node
                   "segmented_ring_all_reduce": st.integers(1, 5)}}  # segments per chunk


def check(case: Case, team: Team) -> None:
    x = make_input(case, case.count)
    ours, ref = x.clone(), x.clone()
    op, builtin = reduce_ops(case)
    tracer = Tracer() if "ring" in case.algorithm else None
    segments = 1
    if case.algorithm == "hierarchical_all_reduce":
        all_reduce.hierarchical_all_reduce(ours, case.param, op, group=team.group)
    elif case.algorithm == "segmented_ring_all_reduce":  # segments of any size, even empty
        all_reduce.segmented_ring_all_reduce(ours, op, group=team.group, tracer=tracer,
                                             segments=case.param, min_segment_bytes=1)
        segments = segment_count(-(-x.numel() // team.size) * x.element_size(), case.param, 1)
    else:
        ALGORITHMS[case.algorithm](ours, op, group=team.group, tracer=tracer)
    dist.all_reduce(ref, builtin, group=team.pg)
    assert_reduced(ours, ref, case, team, "the result")
    if tracer is not None:
        check_ring_spans(tracer, team, segments)


def check_ring_spans(tracer: Tracer, team: Team, segments: int) -> None:
    """p − 1 reduce-scatter steps (send, recv, reduce) and p − 1 all-gather steps (send, recv),
    each message to the right neighbour and from the left one, named by global ranks; the
    segmented ring sends, receives and reduces each chunk in ``segments`` pieces."""
    p, me = team.size, team.ranks[team.rank]
    right, left = team.ranks[(team.rank + 1) % p], team.ranks[(team.rank - 1) % p]
    kinds = Counter((s.kind, s.name) for s in tracer.trace)
    expected = Counter({("send", f"send {me}->{right}"): 2 * (p - 1) * segments,
                        ("recv", f"recv {left}->{me}"): 2 * (p - 1) * segments,
                        ("reduce", "reduce"): (p - 1) * segments})
    assert kinds == +expected, f"ring spans {dict(kinds)} != {dict(+expected)}"
    assert all(s.rank == me and s.end >= s.start for s in tracer.trace)


def test_every_all_reduce_equals_torch_at_any_world_count_dtype_and_op():
    assert_module_passes("all_reduce")
