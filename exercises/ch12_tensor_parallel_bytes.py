"""Chapter 12 exercise: how many bytes one layer's tensor parallelism sends.

Megatron-LM (Shoeybi et al. 2019) splits each transformer layer over ``t`` GPUs: the MLP's
first matrix by columns and its second by rows, the attention by heads. The ``g`` operator
all-reduces the ``b × s × h`` output of each block in the forward pass; the ``f`` operator
all-reduces the gradient of each block's input in the backward pass (textbook chapter 12).
Here you count the bytes one GPU sends for one layer and one micro-batch.

Grade your answer::

    make grade CH=12

and read ``solutions/ch12_tensor_parallel_bytes.py`` afterwards.
"""

from __future__ import annotations


def tensor_parallel_bytes(micro_batch: int, seq: int, hidden: int, t: int,
                          itemsize: int = 2, recompute: bool = False) -> float:
    """Bytes one tensor-parallel rank sends for one layer, one micro-batch, forward and
    backward, when every all-reduce is a ring all-reduce.

    Args:
        micro_batch: ``b`` sequences.
        seq: ``s`` tokens per sequence.
        hidden: ``h``.
        t: tensor-parallel ranks (≥ 1).
        itemsize: bytes per element (2 for fp16).
        recompute: full activation recomputation (the forward runs again in the backward).

    Returns:
        Bytes (a float: ``(t−1)/t`` need not be whole).
    """
    # ===== EXERCISE 12.1: count the bytes ====================================================
    #
    # Points: 4 (in proportion to the tests of ex12_1 that pass; `make grade EX=12.1`)
    #
    # 1. How many all-reduces does one layer run? Forward: one after the attention block, one
    #    after the MLP (g). Backward: one before each (f). And if the forward runs again
    #    (recompute=True)?
    # 2. How big is each? The output of a block is b × s × h elements.
    # 3. A ring all-reduce of n bytes over t ranks: each rank sends (t−1) chunks in the
    #    reduce-scatter and (t−1) in the all-gather, each n/t bytes
    #    (Patarasuk & Yuan 2009; textbook chapter 2, "Ring All-Reduce").
    # 4. Check: b = 1, s = 2048, h = 12288, t = 8, fp16 → about 352 MB (Narayanan et al.
    #    2021: 8·b·s·h·(t−1)/t elements).
    #
    # What is graded (tests/exercises/test_ch12_tensor_parallel_bytes.py):
    #   - every shape against the lab's model (simulator/transformer.py);
    #   - the bytes a simulated tensor-parallel layer really puts on NVLink
    #     (simulator/tensor_parallel/full.py runs every GPU as a process and counts them).
    # ==========================================================================================
    raise NotImplementedError("EXERCISE 12.1: implement tensor_parallel_bytes in "
                              "exercises/ch12_tensor_parallel_bytes.py")
