"""Megatron tensor parallelism from scratch (chapter 12): the tensor-parallel GPT equals the
unsharded one (logits, loss, gradients) for t = 1, 2, 3 with and without sequence
parallelism (and t × d grids), t × p × d grids on the pipeline runtime (tied embedding
across stages) equal it too, our MLP equals PyTorch's DTensor ColwiseParallel /
RowwiseParallel, and the process groups are Megatron's.

One process group per world size runs every case (:func:`tensor_parallel_ranks.run_all`)."""

import pytest

from backends import tensor_parallel as tp
from backends.launch import spawn
from simulator.tensor_parallel import Grid
from tests.backends import tensor_parallel_ranks

pytestmark = pytest.mark.timeout(180)
ATOL = 1e-10  # float64


@pytest.fixture(scope="module", params=[2, 3, 4], ids=lambda w: f"world{w}")
def results(request):
    world = request.param
    return world, spawn(tensor_parallel_ranks.run_all, world, timeout=60)


def test_parallel_gpt_equals_the_unsharded_gpt(results):
    world, per_rank = results
    want = {f"t{t}d{world // t}{s}" for t in range(1, world + 1) if world % t == 0
            for s in ("", "-sp") if not (t == 1 and s)}
    for rank, got in enumerate(per_rank):
        assert set(got["gpt"]) == want
        for case, diffs in got["gpt"].items():
            for what, diff in diffs.items():
                assert diff < ATOL, f"world {world} rank {rank} {case} {what}: max |Δ| = {diff}"


def test_three_d_grids_equal_the_unsharded_gpt(results):
    """t × p × d on the pipeline runtime (1F1B): every stage's gradients, the loss on the last
    stage, and one SGD step (the word embedding's two copies stay equal) — p > 1 at worlds
    2, 3 and 4, several micro-batch counts, sequence parallelism inside the stages."""
    world, per_rank = results
    want = {tensor_parallel_ranks.grid_name(world, *case)
            for case in tensor_parallel_ranks.GRIDS[world]}
    assert any(p > 1 for _, p, _, _ in tensor_parallel_ranks.GRIDS[world])
    grid = tp.megatron_groups(world, 1, world)  # the last pipeline rank reports the loss
    for rank, got in enumerate(per_rank):
        assert set(got["grid"]) == want
        for case, diffs in got["grid"].items():
            p = int(case[3])
            last = rank // (world // p) == p - 1
            assert ("loss" in diffs) == last, f"{case} rank {rank}"
            assert diffs["stage_parameters"] >= 2
            for what, diff in diffs.items():
                if what != "stage_parameters":
                    assert diff < ATOL, f"world {world} rank {rank} {case} {what}: {diff}"
    assert grid.embedding == [[0, world - 1]]
    # every parameter of the GPT is trained by exactly the ranks of one stage
    for case in want:
        if case.startswith("t1") and "d1" in case:
            owned = sum(got["grid"][case]["stage_parameters"] for got in per_rank)
            assert owned == 2 + 12 * 2 + 2 + (world > 1)  # wte on first and last stage


def test_mlp_equals_dtensor_colwise_rowwise(results):
    world, per_rank = results
    for rank, got in enumerate(per_rank):
        for what, diff in got["dtensor"].items():
            assert diff < ATOL, f"world {world} rank {rank} ours vs DTensor {what}: {diff}"


def test_sizes_that_do_not_split_are_refused(results):
    world, per_rank = results
    errors = per_rank[0]["errors"]
    assert "vocabulary size" in errors["vocab"] and f"size {world}" in errors["vocab"]
    assert "attention heads" in errors["heads"]
    assert "sequence length" in errors["sequence"]


def test_megatron_documented_groups():
    """Megatron-LM's ``initialize_model_parallel`` docstring: 16 GPUs, t = 2, p = 4."""
    g = tp.megatron_groups(16, t=2, p=4)
    assert g.d == 2
    assert g.tensor == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]
    assert g.data == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]]
    assert g.pipeline == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    assert g.embedding[0] == [0, 12]


@pytest.mark.parametrize("world,t,p", [(1, 1, 1), (4, 2, 1), (8, 2, 2), (12, 3, 2), (16, 4, 4)])
def test_groups_agree_with_the_simulators_grid(world, t, p):
    g = tp.megatron_groups(world, t, p)
    grid = Grid(t, p, g.d)
    for rank in range(world):
        assert g.of("tensor", rank) == grid.tensor_group(rank)
        assert g.of("data", rank) == grid.data_group(rank)
        assert g.of("pipeline", rank) == grid.pipeline_group(rank)
    for kind in ("tensor", "data", "pipeline"):  # every rank in exactly one group of a kind
        assert sorted(r for ranks in getattr(g, kind) for r in ranks) == list(range(world))


def test_bad_grids_are_refused():
    with pytest.raises(ValueError, match="not a multiple of t·p"):
        tp.megatron_groups(6, t=4)
    with pytest.raises(ValueError, match="at least 1"):
        tp.megatron_groups(4, t=0)
    assert tp.grid_sizes(4, t=2, p=2) == (2, 2, 1)
    with pytest.raises(ValueError, match="not a multiple of t·p"):
        tp.grid_sizes(4, t=3, p=2)


def test_parameter_count():
    import torch

    c = tp.GPTConfig()
    torch.set_default_dtype(torch.float32)
    assert tp.gpt_parameters(c) == sum(p.numel() for p in tp.GPT(c).parameters())
