"""Zero-bubble pipelines from scratch: the same order of actions as PyTorch's schedules, the
same gradients as one-process training and as PyTorch's runtime, and the activation memory
the schedule predicts.

One process group per world size runs every schedule (:func:`zero_bubble_ranks.run_all`)."""

import pytest

from backends.launch import spawn
from backends.pipeline.zero_bubble_builtin import pytorch_order, supported
from simulator.pipeline.schedules.zero_bubble import ZERO_BUBBLE
from tests.backends import zero_bubble_ranks

pytestmark = pytest.mark.timeout(240)
ATOL = 1e-5


@pytest.mark.parametrize("name", sorted(ZERO_BUBBLE))
def test_our_order_equals_pytorchs_pipeline_order_wherever_pytorch_defines_it(name):
    make, _ = ZERO_BUBBLE[name]
    compared = 0
    for p in range(1, 6):
        for m in range(1, 13):
            if not supported(name, p, m):
                continue
            assert make(p, m) == pytorch_order(name, p, m), (name, p, m)
            compared += 1
    assert compared >= 30


def test_pytorch_leaves_some_sizes_undefined_that_ours_runs():
    assert not supported("zb_h1", 2, 5)  # rounds of 2 do not divide 5
    assert not supported("dualpipev", 3, 5)
    assert len(ZERO_BUBBLE["zb_h1"][0](2, 5)[0]) == 15


@pytest.fixture(scope="module", params=[2, 3, 4], ids=lambda w: f"world{w}")
def results(request):
    world = request.param
    return world, spawn(zero_bubble_ranks.run_all, world, timeout=60)


def test_gradients_equal_one_process_training(results):
    world, per_rank = results
    for rank, got in enumerate(per_rank):
        for name, case in got.items():
            assert case["vs_one_process"] < ATOL, (world, rank, name, case)
            if case["loss"] is not None:
                assert case["loss"] == pytest.approx(case["ref_loss"], rel=1e-5)


def test_gradients_equal_pytorchs_schedules(results):
    world, per_rank = results
    for rank, got in enumerate(per_rank):
        for name, case in got.items():
            if supported(name, world, case["m"]):
                assert case["vs_pytorch"] < ATOL, (world, rank, name, case)


def test_measured_peak_activation_bytes_equal_the_prediction(results):
    world, per_rank = results
    for rank, got in enumerate(per_rank):
        for name, case in got.items():
            assert case["measured_peak"] == case["predicted_peak"] > 0, (world, rank, name)


def test_the_v_puts_the_first_and_last_stage_on_rank_zero(results):
    world, per_rank = results
    assert per_rank[0]["zbv"]["stages"] == [0, 2 * world - 1]
    assert per_rank[world - 1]["dualpipev"]["stages"] == [world - 1, world]
