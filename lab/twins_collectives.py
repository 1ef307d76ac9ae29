"""Twins of book chapter 2: every collective, every classic algorithm, named ``op.algorithm``.

The registry is built from :data:`simulator.collectives.ALGORITHMS`: for ``all_reduce.ring``
the simulated twin is ``simulator.collectives.all_reduce.ring_all_reduce`` and the real twin
the function of the same name in :mod:`backends.collectives.all_reduce`. Buffers are float32,
the reduction SUM, the root rank 0. ``nbytes`` is the operation's ``n`` as
``../shared/REFERENCES.md`` defines it: the whole buffer for broadcast, reduce and all-reduce,
the whole gathered/scattered buffer for (all-)gather, scatter and reduce-scatter, all that one
rank sends for all-to-all. Where the buffer is cut into p equal pieces, ``n`` is rounded down to
a whole number of float32 elements per piece — on both twins alike. What each rank runs to
check and time a twin (its buffers, PyTorch's built-in beside it) is
:mod:`backends.collectives.twin_ranks`.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from backends.collectives.twin_ranks import (
    ITEMSIZE,
    ROOTED,
    builtin_step,
    collective_check,
    collective_step,
    effective_nbytes,
)
from backends.collectives.twin_ranks import PIECEWISE as PIECEWISE  # read by lab.checks
from lab.twins import KiB, MiB, Twin, register
from simulator.collectives import ALGORITHMS
from simulator.collectives.fast import fast_path
from simulator.core.comm import SimResult, run_spmd
from simulator.core.hardware import Cluster

RANKS_PER_NODE = 2
"""``hierarchical`` all-reduce treats pairs of ranks as nodes on one machine."""
TOUR = {"all_reduce.ring", "all_reduce.recursive_doubling", "all_gather.ring",
        "broadcast.binomial"}
"""The collectives ``distml-lab report`` shows (the others: ``distml-lab compare NAME``)."""


def _extra(operation: str, algorithm: str) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if operation in ROOTED:
        extra[ROOTED[operation]] = 0
    if algorithm == "hierarchical":
        extra["ranks_per_node"] = RANKS_PER_NODE
    return extra


def _simulate(operation: str, algorithm: str) -> Callable[..., SimResult]:
    program = ALGORITHMS[operation][algorithm][0]

    def simulate(cluster: Cluster, nbytes: int, calls: int = 1, trace: bool = True
                 ) -> SimResult:
        n = effective_nbytes(operation, cluster.world_size, nbytes)
        run = _copy_input_first(program) if operation == "all_gather" else program
        return run_spmd(cluster, run, n, itemsize=ITEMSIZE, calls=calls, trace=trace,
                        **_extra(operation, algorithm))

    return simulate


def _copy_input_first(program: Callable[..., Any]) -> Callable[..., Any]:
    """The program preceded by the real twin's first step: every real all-gather copies its
    input into its own piece of the output (``output[r·k:(r+1)·k].copy_(input)``), ``n/p``
    bytes at the calibrated copy rate, before any message."""
    def run(comm: Any, nbytes: int, **kwargs: Any) -> Any:
        yield from comm.memcpy(nbytes // comm.world_size)
        return (yield from program(comm, nbytes, **kwargs))

    return run


def fast_simulate(name: str, cluster: Cluster) -> Callable[[int], float] | None:
    """The twin's exact fast path on ``cluster`` (:func:`simulator.collectives.fast.fast_path`)
    as ``nbytes -> makespan_s``, on the same ``n`` its simulation moves — or ``None``."""
    fast = fast_path(name, cluster)
    if fast is None:
        return None
    operation = name.split(".", 1)[0]
    return lambda nbytes: fast(effective_nbytes(operation, cluster.world_size, nbytes),
                               ITEMSIZE)


def real_function(operation: str, algorithm: str) -> Callable[..., None]:
    """The real twin: the simulated program's name in the matching ``backends`` module."""
    program = ALGORITHMS[operation][algorithm][0]
    module = importlib.import_module(program.__module__.replace("simulator.", "backends.", 1))
    return getattr(module, program.__name__)  # type: ignore[no-any-return]


def _make(operation: str, algorithm: str) -> Twin:
    cost = ALGORITHMS[operation][algorithm][1]

    extra = _extra(operation, algorithm)

    def real_step(nbytes: int, tracer: Any = None) -> Callable[[], None]:
        return collective_step(real_function(operation, algorithm), operation, extra, nbytes,
                               tracer)

    def check(nbytes: int) -> None:
        collective_check(real_function(operation, algorithm), operation, algorithm, extra,
                         nbytes)

    def closed_form(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
        assert cost is not None
        return cost(p, effective_nbytes(operation, p, n), alpha, beta, gamma)

    worlds = (2, 3, 4)
    return Twin(
        name=f"{operation}.{algorithm}", chapter="2",
        summary=(ALGORITHMS[operation][algorithm][0].__doc__ or "").strip().splitlines()[0]
        .replace("``", ""),
        simulate=_simulate(operation, algorithm), real_step=real_step, check=check,
        closed_form=closed_form if cost is not None else None,
        builtin_step=functools.partial(builtin_step, operation),
        operation=operation, itemsize=ITEMSIZE, dtype="float", redop="sum",
        worlds=worlds, sizes=tuple(2**k for k in range(16, 27, 2)), quick_worlds=(2, 4),
        quick_sizes=(64 * KiB, 4 * MiB), min_world=1,
        tour=f"{operation}.{algorithm}" in TOUR)


for _operation, _algorithms in ALGORITHMS.items():
    for _algorithm in _algorithms:
        register(_make(_operation, _algorithm))
