"""Our all-to-alls equal ``dist.all_to_all_single`` (equal splits) at every world size 1–8,
piece size and dtype; the input is left untouched."""

import torch
import torch.distributed as dist

from backends.collectives import all_to_all
from tests.backends.test_collectives_harness import (
    Case,
    Team,
    assert_module_passes,
    assert_same,
    make_input,
)

ALGORITHMS = {name: getattr(all_to_all, name) for name in (
    "pairwise_all_to_all", "bruck_all_to_all")}
DRAW: dict[str, object] = {}


def check(case: Case, team: Team) -> None:
    sent = make_input(case, team.size * case.count)
    kept = sent.clone()
    ours, ref = torch.empty_like(sent), torch.empty_like(sent)
    ALGORITHMS[case.algorithm](ours, sent, group=team.group)
    dist.all_to_all_single(ref, sent, group=team.pg)
    assert_same(ours, ref, case, "the received buffer")
    assert_same(sent, kept, case, "the input")


def test_every_all_to_all_equals_torch_at_any_world_count_and_dtype():
    assert_module_passes("all_to_all")
