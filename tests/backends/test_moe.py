"""Expert parallelism from scratch: the expert-parallel MoE layer equals the same layer in one
process — outputs, auxiliary loss, the router's and every expert's gradients, the tokens
dropped — at worlds 1–4 with awkward, unequal groups (7 and 13 tokens), ``k`` 1 and 2, a
capacity factor that drops tokens and routing that leaves ranks with nothing to do; the
from-scratch uneven all-to-all equals ``dist.all_to_all_single`` with split sizes.

One process group per world size runs every case (:func:`moe_ranks.run_all`)."""

import pytest
import torch

from backends.launch import spawn
from backends.moe.layer import MoE, capacity
from tests.backends import moe_ranks

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module", params=[1, 2, 3, 4], ids=lambda w: f"world{w}")
def results(request):
    world = request.param
    return world, spawn(moe_ranks.run_all, world, timeout=60)


def test_expert_parallel_layer_equals_one_process_layer(results):
    world, per_rank = results  # the comparisons are asserted inside the ranks
    assert len(per_rank) == world
    assert {name for name, _ in moe_ranks.CASES} <= set(per_rank[0])


def test_the_small_capacity_factor_drops_and_the_skew_starves_ranks(results):
    world, per_rank = results
    assert all(got["k2-drops"]["dropped"] > 0 for got in per_rank)
    assert all(got["k1-all-to-expert-0"]["dropped"] > 0 for got in per_rank)
    if world > 1:  # expert 0 lives on rank 0: every other rank receives no rows at all
        assert all(got["k1-all-to-expert-0"]["own_rows"] == 0 for got in per_rank[1:])


def test_capacity_is_the_ceiling_of_cf_tokens_k_over_experts():
    assert capacity(13, 12, 2, 1.25) == 3  # ⌈2.708⌉
    assert capacity(7, 4, 1, 1.0) == 2
    assert capacity(8, 4, 1, 1.0) == 2


def test_uniform_routing_has_aux_loss_near_one_and_skew_raises_it():
    torch.manual_seed(0)
    x = torch.randn(4096, 16)
    even = MoE(16, 8, 8, k=1).route(x).aux_loss.item()
    torch.manual_seed(0)
    skewed = MoE(16, 8, 8, k=1, skew=4.0).route(x).aux_loss.item()
    assert 0.95 < even < 1.1  # Switch eq. (4): 1 under uniform routing
    assert skewed > 2 * even


def test_a_world_that_does_not_divide_the_experts_is_refused(results):
    world, per_rank = results
    for got in per_rank:
        if world == 3:
            assert "multiple of the world size" in got["refused"]
        else:
            assert "refused" not in got
