"""Grading exercise 2.2: the ring's reduce-scatter phase on real processes, against dist.all_reduce.

Run with ``make grade CH=02`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch02
tests/exercises`` (the reference answer). One launch per world size; the harness is shared
with exercise 2.1 (``grading.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from simulator.collectives.reduce_scatter import ring_reduce_scatter as simulated_twin
from tests.exercises.grading import (
    CASES,
    Launches,
    graded,
    mismatch,
    run_cases,
    traffic_differences,
    wrong_results,
)

pytestmark = [pytest.mark.ch02, pytest.mark.ex02_2]

TODO = ("ring_reduce_scatter_phase is not implemented yet: write it in "
        "exercises/ch02_ring_reduce_scatter.py (EXERCISE 2.2: in step s send chunk r−s−1 "
        "right, receive chunk r−s−2 from the left and combine it), then run `make grade CH=02` "
        "again")


def run_ring_reduce_scatter(cases: tuple[tuple[str, int, str], ...]) -> Any:
    """Rank function: the phase under test on every case; chunk ``rank`` against the same chunk
    of ``dist.all_reduce``'s result."""
    return run_cases("EXERCISE 2.2", "ch02_ring_reduce_scatter", "ring_reduce_scatter_phase",
                     cases, own_chunk)


def own_chunk(label: str, tensor: Any, reference: Any, returned: Any) -> tuple[str, str | None]:
    """The case's report line, naming this rank's chunk, and where that chunk differs."""
    import torch.distributed as dist

    from simulator.collectives.chunks import chunk_bounds

    rank, p = dist.get_rank(), dist.get_world_size()
    lo, hi = chunk_bounds(tensor.numel(), p)[rank]
    return (f"{label}, chunk {rank} = elements [{lo}, {hi})",
            mismatch(tensor[lo:hi], reference[lo:hi], returned))


@pytest.fixture(scope="module")
def run() -> Launches:
    """``run(world)``: the reports of one launch on ``world`` ranks."""
    return Launches(run_ring_reduce_scatter, CASES)


@pytest.mark.parametrize("world", [1, 2, 4])
def test_rank_r_holds_chunk_r_fully_reduced(run, world):
    wrong = wrong_results(graded(run(world), world, TODO))
    assert not wrong, f"on {world} ranks: " + "; ".join(wrong[:3])


@pytest.mark.parametrize("world", [2, 4])
def test_sends_the_messages_of_the_simulated_twin(run, world):
    reports = graded(run(world), world, TODO)
    differences = traffic_differences(reports, simulated_twin, CASES)
    assert not differences, (
        f"on {world} ranks each rank sends p − 1 = {world - 1} messages, one chunk each, every "
        "chunk but its own: " + "; ".join(differences[:3]))

