"""Simulated collective communication (book chapter 2), one module per operation.

Each module holds rank programs for :func:`simulator.core.run_spmd` and, beside each, the
closed-form α-β-γ cost from ``../shared/REFERENCES.md`` (Thakur, Rabenseifner & Gropp 2005). The
real twins live under the same names in :mod:`backends.collectives`.

Every rank program is called ``program(comm, nbytes, [src | dst | …,] itemsize=4)``; every
cost ``cost(p, nbytes, alpha_s, beta_s_per_B, gamma_s_per_B=0.0)`` returns seconds.
:data:`ALGORITHMS` lists them by operation and short name::

    program, cost = ALGORITHMS["all_reduce"]["ring"]
    run_spmd(cluster, program, 2**20).makespan_s      # vs cost(p, 2**20, α, β, γ)

:func:`select_all_reduce` is MPICH's choice of all-reduce algorithm by size, and
:func:`auto_all_reduce` the rank program that follows it.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.collectives import (
    all_gather,
    all_reduce,
    all_to_all,
    broadcast,
    reduce,
    reduce_scatter,
    scatter_gather,
)
from simulator.core.comm import Program, SimComm, SimGen

Cost = Callable[..., float]
"""``cost(p, nbytes, alpha_s, beta_s_per_B, gamma_s_per_B=0.0) -> seconds``."""

ALGORITHMS: dict[str, dict[str, tuple[Program, Cost | None]]] = {
    "broadcast": {
        "linear": (broadcast.linear_broadcast, broadcast.linear_broadcast_cost),
        "binomial": (broadcast.binomial_broadcast, broadcast.binomial_broadcast_cost),
        "pipelined_chain": (broadcast.pipelined_chain_broadcast,
                            broadcast.pipelined_chain_broadcast_cost),
        "scatter_allgather": (broadcast.scatter_allgather_broadcast,
                              broadcast.scatter_allgather_broadcast_cost),
    },
    "scatter": {
        "linear": (scatter_gather.linear_scatter, scatter_gather.linear_scatter_cost),
        "binomial": (scatter_gather.binomial_scatter, scatter_gather.binomial_scatter_cost),
    },
    "gather": {
        "linear": (scatter_gather.linear_gather, scatter_gather.linear_gather_cost),
        "binomial": (scatter_gather.binomial_gather, scatter_gather.binomial_gather_cost),
    },
    "reduce": {
        "linear": (reduce.linear_reduce, reduce.linear_reduce_cost),
        "binomial": (reduce.binomial_reduce, reduce.binomial_reduce_cost),
        "rabenseifner": (reduce.rabenseifner_reduce, reduce.rabenseifner_reduce_cost),
    },
    "all_gather": {
        "ring": (all_gather.ring_all_gather, all_gather.ring_all_gather_cost),
        "recursive_doubling": (all_gather.recursive_doubling_all_gather,
                               all_gather.recursive_doubling_all_gather_cost),
        "bruck": (all_gather.bruck_all_gather, all_gather.bruck_all_gather_cost),
    },
    "reduce_scatter": {
        "ring": (reduce_scatter.ring_reduce_scatter, reduce_scatter.ring_reduce_scatter_cost),
        "recursive_halving": (reduce_scatter.recursive_halving_reduce_scatter,
                              reduce_scatter.recursive_halving_reduce_scatter_cost),
        "pairwise": (reduce_scatter.pairwise_reduce_scatter,
                     reduce_scatter.pairwise_reduce_scatter_cost),
    },
    "all_reduce": {
        "reduce_broadcast": (all_reduce.reduce_broadcast_all_reduce,
                             all_reduce.reduce_broadcast_all_reduce_cost),
        "ring": (all_reduce.ring_all_reduce, all_reduce.ring_all_reduce_cost),
        "segmented_ring": (all_reduce.segmented_ring_all_reduce,
                           all_reduce.segmented_ring_all_reduce_cost),
        "recursive_doubling": (all_reduce.recursive_doubling_all_reduce,
                               all_reduce.recursive_doubling_all_reduce_cost),
        "rabenseifner": (all_reduce.rabenseifner_all_reduce,
                         all_reduce.rabenseifner_all_reduce_cost),
        "binary_tree": (all_reduce.binary_tree_all_reduce, None),
        "double_binary_tree": (all_reduce.double_binary_tree_all_reduce, None),
        "hierarchical": (all_reduce.hierarchical_all_reduce, None),
    },
    "all_to_all": {
        "pairwise": (all_to_all.pairwise_all_to_all, all_to_all.pairwise_all_to_all_cost),
        "bruck": (all_to_all.bruck_all_to_all, all_to_all.bruck_all_to_all_cost),
    },
}
"""Operation → algorithm short name → (rank program, closed form or ``None``)."""

SHORT_MSG_BYTES = 2048
"""MPICH's ``MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE``: up to this size all-reduce is latency-bound."""


def select_all_reduce(p: int, nbytes: int) -> str:
    """MPICH's all-reduce choice (Thakur, Rabenseifner & Gropp 2005; book §2.4).

    * ``recursive_doubling`` for short messages, ``nbytes ≤ 2048`` (MPICH tests
      ``nbytes <= MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE``): ``lg p`` latencies, the fewest;
    * ``rabenseifner`` for longer ones when ``p`` is a power of two: ``2·lg p`` latencies and
      the bandwidth-optimal ``2·n·(p−1)/p`` bytes;
    * ``ring`` otherwise: bandwidth-optimal for any ``p``, at ``2(p−1)`` latencies.
    """
    if nbytes <= SHORT_MSG_BYTES:
        return "recursive_doubling"
    if p & (p - 1) == 0:
        return "rabenseifner"
    return "ring"


def auto_all_reduce(comm: SimComm, nbytes: int, itemsize: int = 4) -> SimGen:
    """All-reduce by the algorithm :func:`select_all_reduce` picks for this size and group."""
    program, _ = ALGORITHMS["all_reduce"][select_all_reduce(comm.world_size, nbytes)]
    yield from program(comm, nbytes, itemsize=itemsize)


__all__ = ["ALGORITHMS", "SHORT_MSG_BYTES", "auto_all_reduce", "select_all_reduce"]
