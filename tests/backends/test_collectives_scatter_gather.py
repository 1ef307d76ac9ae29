"""Our scatters and gathers equal ``dist.scatter``/``dist.gather`` at every world size 1–8,
piece size, dtype and root; the root's input is left untouched."""

import torch
import torch.distributed as dist

from backends.collectives import scatter_gather
from tests.backends.test_collectives_harness import (
    Case,
    Team,
    assert_module_passes,
    assert_same,
    make_input,
)

ALGORITHMS = {name: getattr(scatter_gather, name) for name in (
    "linear_scatter", "binomial_scatter", "linear_gather", "binomial_gather")}
DRAW = {"rooted": True}


def check(case: Case, team: Team) -> None:
    p, k, root = team.size, case.count, team.root
    at_root = dist.get_rank() == root
    if case.algorithm.endswith("scatter"):
        whole = make_input(case, p * k) if at_root else None
        kept = None if whole is None else whole.clone()
        ours, ref = make_input(case, k), make_input(case, k)
        ALGORITHMS[case.algorithm](ours, whole, root, group=team.group)
        pieces = None if whole is None else list(whole.view(p, k).unbind())
        dist.scatter(ref, pieces, src=root, group=team.pg)
        assert_same(ours, ref, case, "the piece received")
        if whole is not None and kept is not None:
            assert_same(whole, kept, case, "the root's input")
    else:
        piece = make_input(case, k)
        gathered = torch.empty(p * k, dtype=piece.dtype) if at_root else None
        pieces = [torch.empty_like(piece) for _ in range(p)] if at_root else None
        ALGORITHMS[case.algorithm](piece, gathered, root, group=team.group)
        dist.gather(piece, pieces, dst=root, group=team.pg)
        if gathered is not None and pieces is not None:
            assert_same(gathered, torch.cat(pieces), case, "the gathered buffer")


def test_every_scatter_and_gather_equals_torch_at_any_world_count_dtype_and_root():
    assert_module_passes("scatter_gather")
