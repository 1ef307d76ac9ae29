"""Our four broadcasts equal ``dist.broadcast`` at every world size 1–8, count, dtype and root."""

import torch.distributed as dist
from hypothesis import strategies as st

from backends.collectives import broadcast
from tests.backends.test_collectives_harness import (
    Case,
    Team,
    assert_module_passes,
    assert_same,
    make_input,
)

ALGORITHMS = {name: getattr(broadcast, name) for name in (
    "linear_broadcast", "binomial_broadcast", "pipelined_chain_broadcast",
    "scatter_allgather_broadcast")}
DRAW = {"rooted": True,
        "params": {"pipelined_chain_broadcast": st.sampled_from([512, 4096, 65536])}}


def check(case: Case, team: Team) -> None:
    x = make_input(case, case.count)
    ours, ref = x.clone(), x.clone()
    segment = {"segment_bytes": case.param} if case.param else {}
    ALGORITHMS[case.algorithm](ours, team.root, group=team.group, **segment)
    dist.broadcast(ref, team.root, group=team.pg)
    assert_same(ours, ref, case, "the broadcast buffer")


def test_every_broadcast_equals_torch_at_any_world_count_dtype_and_root():
    assert_module_passes("broadcast")
