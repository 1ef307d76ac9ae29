"""The rank programs behind chapters 1–2's twins stand on their own: they find a twin through
the lookup they are given (no ``lab`` needed), time ours beside PyTorch's, and a collective
that computes the wrong thing fails its check."""

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from backends.collectives import twin_ranks
from backends.collectives.all_reduce import ring_all_reduce
from backends.launch import spawn


@dataclass(frozen=True)
class FakeTwin:
    """A twin's real side without the registry."""

    name: str
    real_step: Callable[[int, Any], Callable[[], None]]
    check: Callable[[int], None]
    builtin_step: Callable[[int], Callable[[], None]] | None = None


def lookup(name: str) -> FakeTwin:
    """Two twins, built from backends alone: the ring all-reduce and the ping-pong."""
    if name == "ping_pong":
        return FakeTwin(name, twin_ranks.ping_pong_step, twin_ranks.ping_pong_check)
    return FakeTwin(
        name, functools.partial(twin_ranks.collective_step, ring_all_reduce, "all_reduce", {}),
        functools.partial(twin_ranks.collective_check, ring_all_reduce, "all_reduce", "ring",
                          {}),
        functools.partial(twin_ranks.builtin_step, "all_reduce"))


def measure_and_break(sizes: list[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                 str]:
    """Rank function: both twins timed, then a do-nothing all-reduce checked (its error)."""
    rows = twin_ranks.measure_twin(lookup, "all_reduce.ring", sizes, 1)
    p2p = twin_ranks.measure_twin(lookup, "ping_pong", sizes, 1)
    try:
        twin_ranks.collective_check(lambda *a, **k: None, "all_reduce", "noop", {}, 64)
    except AssertionError as error:
        dist.barrier()
        return rows, p2p, str(error)
    return rows, p2p, ""


def test_measure_twin_times_ours_beside_pytorchs_and_a_wrong_collective_fails_its_check():
    sizes = [64, 4096]
    for rank, (rows, p2p, error) in enumerate(spawn(measure_and_break, 2, sizes,
                                                    backend="gloo")):
        assert len(rows) == len(p2p) == len(sizes)
        assert all(r["median_s"] > 0 and r["builtin_median_s"] > 0 and r["calls"] >= 1
                   for r in rows)
        assert all("builtin_median_s" not in r for r in p2p)  # no built-in ping-pong
        assert error == f"rank {rank}: all_reduce.noop differs from PyTorch's all_reduce"


@given(st.sampled_from(sorted(twin_ranks.PIECEWISE | {"broadcast", "reduce", "all_reduce"})),
       st.integers(1, 64), st.integers(0, 2**24))
def test_effective_nbytes_is_whole_elements_and_whole_pieces(operation, world, nbytes):
    n = twin_ranks.effective_nbytes(operation, world, nbytes)
    unit = twin_ranks.ITEMSIZE * (world if operation in twin_ranks.PIECEWISE else 1)
    assert 0 <= nbytes - n < unit and n % unit == 0
