"""ZeRO stages 0–3 from scratch: the same parameters as plain data parallelism and as PyTorch's
ZeroRedundancyOptimizer / fully_shard, and the model-state memory the simulator predicts.

One process group per world size runs every case (:func:`zero_ranks.run_all`)."""

import itertools

import pytest

from backends.launch import spawn
from simulator.zero import model_state_bytes
from tests.backends import zero_ranks

pytestmark = pytest.mark.timeout(240)
ATOL = 1e-5


@pytest.fixture(scope="module", params=[1, 2, 3, 4], ids=lambda w: f"world{w}")
def results(request):
    world = request.param
    return world, spawn(zero_ranks.run_all, world, timeout=60)


def test_every_stage_equals_plain_data_parallelism(results):
    world, per_rank = results
    for rank, got in enumerate(per_rank):
        for key, diff in got["matrix"].items():
            if key.startswith("tied/stage3"):
                assert "tied weights" in diff, (world, rank, key, diff)
            else:
                assert diff < ATOL, f"world {world} rank {rank} {key}: max |Δ| = {diff}"


def test_against_zero_redundancy_optimizer_and_fully_shard(results):
    world, per_rank = results
    for rank, got in enumerate(per_rank):
        assert set(got["builtin"]) == {1, 3}
        for stage, diff in got["builtin"].items():
            what = "ZeroRedundancyOptimizer" if stage == 1 else "fully_shard"
            assert diff < ATOL, f"world {world} rank {rank}: ours vs {what}: max |Δ| = {diff}"


def test_measured_model_states_equal_the_prediction(results):
    world, per_rank = results
    widths = zero_ranks.MEMORY_WIDTHS
    params = sum(a * b + b for a, b in itertools.pairwise(widths))
    for rank, got in enumerate(per_rank):
        for stage, measured in got["memory"].items():
            want = model_state_bytes(params, stage, world, "fp32", "adam")
            for part in ("parameters", "gradients", "optimizer"):
                predicted = getattr(want, part)
                assert measured[part] == pytest.approx(predicted, rel=0.05), (
                    f"world {world} rank {rank} stage {stage} {part}: measured "
                    f"{measured[part]} B, predicted {predicted} B")
