"""A grid's virtual stages, whatever the model: the one entry point the simulators call.

:func:`chunks` hands a dense model without context parallelism to
:func:`~simulator.tensor_parallel.chunks.dense_chunks` and a mixture-of-experts model, or any
model split over ``cp > 1`` context-parallel ranks, to
:func:`~simulator.tensor_parallel.moe_chunks.moe_chunks`, which builds on the dense module's
:class:`~simulator.tensor_parallel.chunks.Chunk` (hence a module of its own: neither of the two
imports the other's caller).
"""

from __future__ import annotations

import math

from simulator.core.gemm import GemmModel
from simulator.tensor_parallel.chunks import Chunk, dense_chunks
from simulator.tensor_parallel.config import MegatronConfig
from simulator.tensor_parallel.moe_chunks import moe_chunks


def chunks(config: MegatronConfig, flops_per_s: float,
           mem_bandwidth_Bps: float = math.inf, gemm: GemmModel | None = None) -> list[Chunk]:
    """The ``p·v`` virtual stages, in pipeline order, as one tensor-parallel rank runs them
    (FLOP/s, B/s; ``gemm`` prices matrix multiplications by shape)."""
    if config.grid.cp > 1 or getattr(config.model, "experts", 0) > 0:
        return moe_chunks(config, flops_per_s, mem_bandwidth_Bps, gemm)
    return dense_chunks(config, flops_per_s, mem_bandwidth_Bps, gemm)
