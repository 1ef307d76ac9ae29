"""Model parallelism over RPC: a split model, its RPC pipeline and an RPC parameter server train
exactly like one process does (distributed autograd and DistributedOptimizer included)."""

import pytest

from backends.launch import RankError, spawn
from tests.backends import rpc_ranks

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]
ATOL = 1e-6


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda w: f"world{w}")
def suite(request):
    return request.param, spawn(rpc_ranks.run_suite, request.param, timeout=60)[0]


def test_split_forward_equals_the_whole_model(suite):
    world, got = suite
    assert got["forward"] < ATOL, (world, got)
    assert got["pipelined"] < ATOL, (world, got)


def test_distributed_autograd_and_optimizer_train_like_one_process(suite):
    world, got = suite
    assert got["split_train"] < ATOL, (world, got)
    assert got["pipelined_train"] < ATOL, (world, got)


def test_rpc_parameter_server_averages_every_trainer(suite):
    world, got = suite
    assert got["ps_rounds"] == rpc_ranks.STEPS
    assert got["parameter_server"] < ATOL, (world, got)


def test_a_failing_stage_names_its_error_and_does_not_hang():
    with pytest.raises(RankError, match="stage factory failed on purpose"):
        spawn(rpc_ranks.fail_on_worker, 2, timeout=20, deadline=90)
