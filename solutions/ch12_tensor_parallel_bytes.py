"""Chapter 12, reference answer: bytes one layer's tensor parallelism sends.

The exercise is in ``exercises/ch12_tensor_parallel_bytes.py``; the lab's own count is
:func:`simulator.transformer.tensor_parallel_elements_per_layer`.
"""

from __future__ import annotations


def tensor_parallel_bytes(micro_batch: int, seq: int, hidden: int, t: int,
                          itemsize: int = 2, recompute: bool = False) -> float:
    """Bytes one rank sends per layer and micro-batch (see the exercise)."""
    all_reduces = 6 if recompute else 4  # g twice forward, f twice backward (+ g twice again)
    block = micro_batch * seq * hidden * itemsize  # one block's output, bytes
    return all_reduces * 2 * (t - 1) / t * block  # a ring sends 2(t−1)/t of it per rank
