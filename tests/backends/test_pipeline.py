"""The real pipeline twin: parity with single-process training and with PyTorch's pipelining.

ONE launch of 4 ranks runs every distributed case (launching costs seconds each); 2- and
3-stage cases run on sub-groups. Synchronous schedules (GPipe, 1F1B, interleaved 1F1B) under
every checkpoint mode must give the loss and gradients of plain single-process training —
with 1 and 3 micro-batches and a batch the micro-batch count does not divide — and the same
numbers as ``torch.distributed.pipelining``'s ``ScheduleGPipe``/``Schedule1F1B`` on the same
split. PipeDream's asynchronous runtime must end with the weights of a one-process replay of
its weight versions. A stage that fails is named, within seconds.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from backends.launch import RankError, spawn
from tests.backends.pipeline_fns import (
    BuiltinCase,
    PipeDreamCase,
    SyncCase,
    failing_stage,
    run_all,
)

SYNC_CASES = [
    SyncCase(2, "gpipe", "never", 1, 6),
    SyncCase(2, "1f1b", "always", 3, 7),
    SyncCase(2, "interleaved", "except_last", 4, 8, chunks=2),
    SyncCase(3, "gpipe", "except_last", 3, 9),
    SyncCase(3, "1f1b", "never", 4, 10),
    SyncCase(3, "interleaved", "never", 3, 7, chunks=2),
    SyncCase(4, "gpipe", "always", 3, 7),
    SyncCase(4, "1f1b", "except_last", 1, 5),
    SyncCase(4, "1f1b", "never", 6, 13),
]
BUILTIN_CASES = [
    BuiltinCase(2, "gpipe", 4, 8),
    BuiltinCase(3, "1f1b", 3, 9),
    BuiltinCase(4, "gpipe", 1, 4),
    BuiltinCase(4, "1f1b", 4, 8),
]
PIPEDREAM_CASES = [
    PipeDreamCase(3, 7, False),
    PipeDreamCase(3, 7, True),
    PipeDreamCase(4, 6, False),
]
CASES: list[Any] = SYNC_CASES + BUILTIN_CASES + PIPEDREAM_CASES


@pytest.fixture(scope="module")
def results() -> dict[str, list[dict[str, Any]]]:
    """Every case's per-rank results, from one launch of 4 ranks."""
    per_rank = spawn(run_all, 4, CASES, timeout=20, deadline=120)
    return {str(case): [r[k] for r in per_rank if r[k] is not None]
            for k, case in enumerate(CASES)}


@pytest.mark.parametrize("case", SYNC_CASES, ids=str)
def test_synchronous_pipeline_equals_single_process_training(
        case: SyncCase, results: dict[str, list[dict[str, Any]]]) -> None:
    ranks = results[str(case)]
    assert len(ranks) == case.stages
    assert all(r["params"] > 0 for r in ranks)
    for rank, r in enumerate(ranks):
        assert r["grad_diff"] < 1e-5, f"{case}: rank {rank} gradients differ by {r['grad_diff']}"
    assert ranks[-1]["loss_diff"] < 1e-5, f"{case}: loss differs by {ranks[-1]['loss_diff']}"


@pytest.mark.parametrize("case", BUILTIN_CASES, ids=str)
def test_same_numbers_as_torch_distributed_pipelining(
        case: BuiltinCase, results: dict[str, list[dict[str, Any]]]) -> None:
    ranks = results[str(case)]
    for rank, r in enumerate(ranks):
        assert r["grad_diff"] < 1e-6, f"{case}: rank {rank} gradients differ by {r['grad_diff']}"
    assert ranks[-1]["loss_diff"] < 1e-6


@pytest.mark.parametrize("case", PIPEDREAM_CASES, ids=str)
def test_pipedream_weight_stashing_matches_replay_of_its_versions(
        case: PipeDreamCase, results: dict[str, list[dict[str, Any]]]) -> None:
    ranks = results[str(case)]
    for rank, r in enumerate(ranks):
        assert r["weight_diff"] < 1e-5, f"{case}: rank {rank} weights differ by {r['weight_diff']}"
        assert r["versions"] == r["planned_versions"], (
            f"{case}: rank {rank} held {r['versions']} weight versions, the plan says "
            f"{r['planned_versions']}")
    assert ranks[-1]["loss_diff"] < 1e-5


def test_activation_memory_shrinks_with_1f1b_and_checkpointing(
        results: dict[str, list[dict[str, Any]]]) -> None:
    """GPipe keeps all m micro-batches on stage 0, checkpointing keeps only inputs."""
    never = results[str(SyncCase(3, "gpipe", "except_last", 3, 9))]
    assert all(r["peak"] > 0 for r in never)
    ones = results[str(SyncCase(3, "1f1b", "never", 4, 10))]
    assert ones[0]["peak"] > ones[-1]["peak"]  # stage 0 holds p micro-batches, the last one


def test_a_failing_stage_is_named_within_seconds() -> None:
    start = time.monotonic()
    with pytest.raises(RankError) as info:
        spawn(failing_stage, 2, timeout=10, deadline=60)
    assert info.value.rank == 1
    assert "this layer is broken" in str(info.value)
    assert "stage 1" in str(info.value)
    assert time.monotonic() - start < 30


def test_bad_input_gets_a_clear_error() -> None:
    from backends.pipeline.checkpointing import checkpoint_stop
    from backends.pipeline.microbatch import micro_batch_sizes, split
    from backends.pipeline.models import mlp
    from backends.pipeline.partition import partition

    with pytest.raises(ValueError, match="sums to 5 layers but the model has 6"):
        partition(mlp(6, 4), [2, 3])
    with pytest.raises(ValueError, match="at least one layer"):
        partition(mlp(2, 4), [2, 0])
    with pytest.raises(ValueError, match="batch of 3 examples into 4 micro-batches"):
        split(torch.zeros(3, 2), 4)
    with pytest.raises(ValueError, match="checkpoint mode"):
        checkpoint_stop("sometimes", 4)
    assert micro_batch_sizes(7, 3) == [3, 2, 2]
