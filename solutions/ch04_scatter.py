"""Chapter 4, reference answer: DataParallel's scatter (``torch.chunk``'s rule).

The exercise is in ``exercises/ch04_scatter.py``; ``backends/data_parallel.py`` scatters the
same way (``chunk_sizes``), and ``simulator/data_parallel.py`` counts the same chunks.
"""

from __future__ import annotations

import torch


def scatter(tensor: torch.Tensor, parts: int, dim: int = 0) -> list[torch.Tensor]:
    """Cut ``tensor`` along ``dim`` into at most ``parts`` views of ``⌈n/parts⌉`` rows (the
    last one shorter); fewer chunks than ``parts`` when the rows run out."""
    n = tensor.size(dim) if tensor.dim() else 0
    if parts < 1 or n < 1:
        raise ValueError(f"cannot scatter {n} rows into {parts} chunks: both must be >= 1")
    size = -(-n // parts)  # ⌈n / parts⌉
    return [tensor.narrow(dim, start, min(size, n - start)) for start in range(0, n, size)]
