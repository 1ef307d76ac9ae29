"""Our Megatron MLP against PyTorch's DTensor parallel styles, timed on real processes.

:func:`mlp_speed` launches :func:`backends.tensor_parallel.measure.mlp_speed_rank` on ``world``
processes: forward + backward of our :class:`~backends.tensor_parallel.ParallelMLP` and of
``parallelize_module`` with ``ColwiseParallel``/``RowwiseParallel`` on the same weights and
input, repeats interleaved. ``benchmarks/versus_pytorch.py`` reads its ratio.
"""

from __future__ import annotations

from typing import Any


def mlp_speed(world: int, hidden: int, tokens: int, repeats: int = 10,
              timeout: float = 120.0) -> dict[str, Any]:
    """Rank 0's row of :func:`~backends.tensor_parallel.measure.mlp_speed_rank` on ``world``
    processes (tensor-parallel degree ``world``): ``ours`` and ``dtensor`` timings (median,
    p10, p90 of a forward + backward, s) and ``ratio`` (ours / DTensor's median)."""
    from backends.launch import spawn
    from backends.tensor_parallel.measure import mlp_speed_rank

    return spawn(mlp_speed_rank, world, hidden, tokens, repeats,  # type: ignore[no-any-return]
                 timeout=timeout)[0]
