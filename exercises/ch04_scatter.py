"""Chapter 4 exercise: DataParallel's scatter, uneven chunks included.

``torch.nn.DataParallel`` cuts every input along the batch dimension into one chunk per device
with the rule of ``torch.chunk`` (textbook chapter 4, "Forward pass: scatter"): every chunk
has ``⌈n/k⌉`` rows except the last, which gets what is left — and when the rows run out early,
there are *fewer* chunks than devices, and DataParallel only runs that many replicas::

    n = 8,  k = 3   ->  3, 3, 2
    n = 5,  k = 4   ->  2, 2, 1          (three chunks: the fourth device sits idle)
    n = 2,  k = 4   ->  1, 1

Grade your answer::

    make grade CH=04

and read ``solutions/ch04_scatter.py`` afterwards; ``backends/data_parallel.py`` uses the same
rule to scatter the batch.
"""

from __future__ import annotations

import torch


def scatter(tensor: torch.Tensor, parts: int, dim: int = 0) -> list[torch.Tensor]:
    """Cut ``tensor`` along ``dim`` into at most ``parts`` chunks, ``torch.chunk``'s way.

    Args:
        tensor: the batch, with at least one row along ``dim``.
        parts: the number of devices, ≥ 1.
        dim: the dimension to cut (negative counts from the end, as in PyTorch).

    Returns:
        The chunks, in order, as *views* of ``tensor`` (no copy: moving them to their devices
        is the next step); concatenated along ``dim`` they give ``tensor`` back.

    Raises:
        ValueError: ``parts < 1`` or the tensor has no rows along ``dim``.
    """
    # ===== EXERCISE 4.1: scatter with uneven chunks ========================================
    #
    # Points: 6 (in proportion to the tests of ex04_1 that pass; `make grade EX=4.1`)
    #
    # 1. n = tensor.size(dim); check parts >= 1 and n >= 1 (ValueError otherwise).
    # 2. size = ⌈n / parts⌉ — in integers: -(-n // parts).
    # 3. Walk start = 0, size, 2·size, … while start < n and take
    #        tensor.narrow(dim, start, min(size, n - start))
    #    (narrow makes a view). Count the chunks: for n = 5, parts = 4 there are three.
    # Do not call torch.chunk, torch.split or Tensor.chunk/split/tensor_split: the grading
    # tests switch them off.
    #
    # What is graded (tests/exercises/test_ch04_scatter.py, `make grade CH=04`):
    #   - your chunks equal torch.chunk's for many shapes, part counts and dims (hypothesis),
    #     and are views of the input;
    #   - the chunk sizes are the ones the simulated twin uses (simulator.data_parallel);
    #   - sim vs real: with your scatter in place of the backend's, DataParallel on CPU
    #     replicas gives the same loss and gradients as one device, at 1-4 replicas.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 4.1: implement scatter in exercises/ch04_scatter.py")
