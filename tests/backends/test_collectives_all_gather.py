"""Our all-gathers equal ``dist.all_gather_into_tensor`` at every world size 1–8, piece size
and dtype; the input is left untouched."""

import torch
import torch.distributed as dist

from backends.collectives import all_gather
from tests.backends.test_collectives_harness import (
    Case,
    Team,
    assert_module_passes,
    assert_same,
    make_input,
)

ALGORITHMS = {name: getattr(all_gather, name) for name in (
    "ring_all_gather", "recursive_doubling_all_gather", "bruck_all_gather")}
DRAW: dict[str, object] = {}
BUILTIN = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def check(case: Case, team: Team) -> None:
    piece = make_input(case, case.count)
    kept = piece.clone()
    ours = torch.empty(team.size * case.count, dtype=piece.dtype)
    ref = torch.empty_like(ours)
    ALGORITHMS[case.algorithm](ours, piece, group=team.group)
    BUILTIN(ref, piece, group=team.pg)
    assert_same(ours, ref, case, "the gathered buffer")
    assert_same(piece, kept, case, "the input")


def test_every_all_gather_equals_torch_at_any_world_count_and_dtype():
    assert_module_passes("all_gather")
