"""Chapter 21 exercise: merge two partial attention results — the step that lets ring
attention see the keys one block at a time and still be exact.

Attention of a query row over keys ``k`` is ``softmax(s)·v`` with scores ``s_j = q·k_j/√d``.
Over one *block* of the keys a rank gets a partial output ``o_b`` (softmax over that block
only) and the row's log-sum-exp ``ℓ_b = log Σ_{j∈b} e^{s_j}``. Two blocks' results combine
into the attention over both, exactly (Milakov & Gimelshein 2018, "Online normalizer
calculation for softmax"; Dao et al. 2022, FlashAttention §3.1; textbook chapter 21).

Grade your answer::

    make grade EX=21.1

and read ``solutions/ch21_merge.py`` afterwards.
"""

from __future__ import annotations

import torch


def merge(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over the union of two key blocks.

    Args:
        out_a, out_b: the blocks' partial outputs, ``(batch, heads, rows, dim)``.
        lse_a, lse_b: their log-sum-exps per row, ``(batch, heads, rows)``; ``−∞`` for a row
            that has seen no key yet (its output then is 0).

    Returns:
        ``(out, lse)``: the output and log-sum-exp over both blocks, same shapes.
    """
    # ===== EXERCISE 21.1: the online-softmax merge ===========================================
    #
    # Points: 8 (in proportion to the tests of ex21_1 that pass; `make grade EX=21.1`)
    #
    # 1. Write o_a with its normaliser: o_a = Σ_{j∈a} e^{s_j} v_j / e^{ℓ_a}. What is the
    #    numerator in terms of o_a and ℓ_a? Add the two numerators, divide by the new
    #    normaliser e^ℓ. What is ℓ in terms of ℓ_a and ℓ_b?
    # 2. Never form e^{ℓ}: scores can be in the thousands. Only differences like ℓ_a − ℓ are
    #    safe to exponentiate; torch has a stable log(e^x + e^y).
    # 3. Rows with ℓ_a = −∞ must come out as block b exactly (no NaN): check what your
    #    formula gives there.
    # 4. ℓ has one value per row; o has dim values per row — mind the broadcasting.
    #
    # What is graded (tests/exercises/test_ch21_merge.py), all in fp64 against
    # torch.nn.functional.scaled_dot_product_attention over the whole key sequence (1e-12):
    #   - random blocks and cuts; three blocks in any order and grouping; causal blocks;
    #   - scores in the thousands (no overflow); rows that have seen nothing yet.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 21.1: implement merge in exercises/ch21_merge.py")
