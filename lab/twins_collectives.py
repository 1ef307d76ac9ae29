"""Twins of book chapter 2: every collective, every classic algorithm, named ``op.algorithm``.

The registry is built from :data:`simulator.collectives.ALGORITHMS`: for ``all_reduce.ring``
the simulated twin is ``simulator.collectives.all_reduce.ring_all_reduce`` and the real twin
the function of the same name in :mod:`backends.collectives.all_reduce`. Buffers are float32,
the reduction SUM, the root rank 0. ``nbytes`` is the operation's ``n`` as
``../shared/REFERENCES.md`` defines it: the whole buffer for broadcast, reduce and all-reduce,
the whole gathered/scattered buffer for (all-)gather, scatter and reduce-scatter, all that one
rank sends for all-to-all. Where the buffer is cut into p equal pieces, ``n`` is rounded down to
a whole number of float32 elements per piece — on both twins alike.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from lab.twins import KiB, MiB, Twin, register
from simulator.collectives import ALGORITHMS
from simulator.core.comm import SimResult, run_spmd
from simulator.core.hardware import Cluster

ITEMSIZE = 4  # float32
RANKS_PER_NODE = 2
"""``hierarchical`` all-reduce treats pairs of ranks as nodes on one machine."""
TOUR = {"all_reduce.ring", "all_reduce.recursive_doubling", "all_gather.ring",
        "broadcast.binomial"}
"""The collectives ``distml-lab report`` shows (the others: ``distml-lab compare NAME``)."""
PIECEWISE = {"scatter", "gather", "all_gather", "reduce_scatter", "all_to_all"}
ROOTED = {"broadcast": "src", "scatter": "src", "gather": "dst", "reduce": "dst"}


def effective_nbytes(operation: str, world: int, nbytes: int) -> int:
    """``nbytes`` rounded down to whole float32 elements (and whole pieces per rank)."""
    count = nbytes // ITEMSIZE
    if operation in PIECEWISE:
        count = count // world * world
    return count * ITEMSIZE


def _extra(operation: str, algorithm: str) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if operation in ROOTED:
        extra[ROOTED[operation]] = 0
    if algorithm == "hierarchical":
        extra["ranks_per_node"] = RANKS_PER_NODE
    return extra


def _simulate(operation: str, algorithm: str) -> Callable[..., SimResult]:
    program = ALGORITHMS[operation][algorithm][0]

    def simulate(cluster: Cluster, nbytes: int, calls: int = 1) -> SimResult:
        n = effective_nbytes(operation, cluster.world_size, nbytes)
        run = _copy_input_first(program) if operation == "all_gather" else program
        return run_spmd(cluster, run, n, itemsize=ITEMSIZE, calls=calls,
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


def real_function(operation: str, algorithm: str) -> Callable[..., None]:
    """The real twin: the simulated program's name in the matching ``backends`` module."""
    program = ALGORITHMS[operation][algorithm][0]
    module = importlib.import_module(program.__module__.replace("simulator.", "backends.", 1))
    return getattr(module, program.__name__)  # type: ignore[no-any-return]


def _buffers(operation: str, nbytes: int, fill: Callable[[int], Any]) -> tuple[Any, ...]:
    """The arguments of one call, for this rank: (tensor,) or (output, input)."""
    import torch.distributed as dist

    p, rank = dist.get_world_size(), dist.get_rank()
    count = effective_nbytes(operation, p, nbytes) // ITEMSIZE
    piece = count // p if operation in PIECEWISE else count
    if operation in ("broadcast", "reduce", "all_reduce"):
        return (fill(count),)
    if operation in ("scatter", "gather"):  # (piece, whole buffer on the root only)
        return fill(piece), fill(count) if rank == 0 else None
    if operation == "all_gather":
        return fill(count), fill(piece)
    if operation == "reduce_scatter":
        return fill(piece), fill(count)
    return fill(count), fill(count)  # all_to_all: output, input


def _call(fn: Callable[..., None], operation: str, algorithm: str, args: tuple[Any, ...],
          tracer: Any = None) -> None:
    extra = _extra(operation, algorithm)
    if operation in ROOTED:
        fn(*args, extra.pop(ROOTED[operation]), tracer=tracer, **extra)
    else:
        fn(*args, tracer=tracer, **extra)


def builtin_call(operation: str, args: tuple[Any, ...]) -> None:
    """PyTorch's own collective on the same buffers (root 0, SUM)."""
    import torch.distributed as dist

    p = dist.get_world_size()
    if operation == "broadcast":
        dist.broadcast(args[0], 0)
    elif operation == "reduce":
        dist.reduce(args[0], 0)
    elif operation == "all_reduce":
        dist.all_reduce(args[0])
    elif operation == "scatter":
        out, whole = args
        dist.scatter(out, list(whole.chunk(p)) if whole is not None else None, src=0)
    elif operation == "gather":
        piece, whole = args
        dist.gather(piece, list(whole.chunk(p)) if whole is not None else None, dst=0)
    elif operation == "all_gather":
        dist.all_gather_single(args[0], args[1])  # all_gather_into_tensor's new name
    elif operation == "reduce_scatter":
        dist.reduce_scatter_single(args[0], args[1])  # reduce_scatter_tensor's new name
    else:
        dist.all_to_all_single(args[0], args[1])


def _zeros(count: int) -> Any:
    import torch

    return torch.zeros(count, dtype=torch.float32)


def _make(operation: str, algorithm: str) -> Twin:
    cost = ALGORITHMS[operation][algorithm][1]

    def real_step(nbytes: int, tracer: Any = None) -> Callable[[], None]:
        fn, args = real_function(operation, algorithm), _buffers(operation, nbytes, _zeros)
        return lambda: _call(fn, operation, algorithm, args, tracer)

    def builtin_step(nbytes: int) -> Callable[[], None]:
        args = _buffers(operation, nbytes, _zeros)
        return lambda: builtin_call(operation, args)

    def check(nbytes: int) -> None:
        import torch
        import torch.distributed as dist

        gen = torch.Generator().manual_seed(dist.get_rank())

        def fill(count: int) -> Any:
            return torch.randint(-100, 100, (count,), generator=gen).float()

        ours = _buffers(operation, max(nbytes, 4 * ITEMSIZE * dist.get_world_size()), fill)
        theirs = tuple(None if t is None else t.clone() for t in ours)
        _call(real_function(operation, algorithm), operation, algorithm, ours)
        builtin_call(operation, theirs)
        if operation == "reduce" and dist.get_rank() != 0:
            return  # only the root's result is defined (others may hold partial sums)
        for a, b in zip(ours, theirs, strict=True):
            if a is not None and not torch.equal(a, b):  # type: ignore[arg-type]
                raise AssertionError(f"rank {dist.get_rank()}: {operation}.{algorithm} "
                                     f"differs from PyTorch's {operation}")

    def closed_form(p: int, n: int, alpha: float, beta: float, gamma: float) -> float:
        assert cost is not None
        return cost(p, effective_nbytes(operation, p, n), alpha, beta, gamma)

    worlds = (2, 3, 4)
    return Twin(
        name=f"{operation}.{algorithm}", chapter="2",
        summary=(ALGORITHMS[operation][algorithm][0].__doc__ or "").strip().splitlines()[0]
        .replace("``", ""),
        simulate=_simulate(operation, algorithm), real_step=real_step, check=check,
        closed_form=closed_form if cost is not None else None, builtin_step=builtin_step,
        operation=operation, itemsize=ITEMSIZE, dtype="float", redop="sum",
        worlds=worlds, sizes=tuple(2**k for k in range(16, 27, 2)), quick_worlds=(2, 4),
        quick_sizes=(64 * KiB, 4 * MiB), min_world=1,
        tour=f"{operation}.{algorithm}" in TOUR)


for _operation, _algorithms in ALGORITHMS.items():
    for _algorithm in _algorithms:
        register(_make(_operation, _algorithm))
