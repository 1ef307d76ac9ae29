"""Chapter 21 exercise: the zig-zag layout, and how much a ring step of causal attention costs.

Ring attention splits the sequence over ``p`` ranks; each ring step a rank attends its queries
to another rank's keys. With a causal mask a query never sees a later key, so a contiguous
split leaves the first rank idle most steps while the last one works on every step. Cutting
the sequence into ``2p`` chunks and giving rank ``r`` chunks ``r`` and ``2p−1−r`` balances it
(Brandon et al. 2023, "Striped Attention"; Llama 3 team 2024, §3.3.2; textbook chapter 21).
Work is counted in ``c × c`` sub-blocks, ``c = S/2p`` the chunk length: a rank's queries
against one rank's keys is at most ``2 × 2 = 4`` of them.

Grade your answer::

    make grade EX=21.2

and read ``solutions/ch21_zigzag.py`` afterwards.
"""

from __future__ import annotations


def zigzag_chunks(rank: int, world: int) -> tuple[int, int]:
    """The two chunks (numbered ``0 … 2·world−1`` in sequence order) rank ``rank`` holds in
    the zig-zag layout, early one first."""
    # ===== EXERCISE 21.2: zig-zag chunks and causal work per ring step ======================
    #
    # Points: 6 (in proportion to the tests of ex21_2 that pass; `make grade EX=21.2`)
    #
    # Three functions: zigzag_chunks, contiguous_chunks and step_work.
    # 1. The chunks: zig-zag as in the docstring above; contiguous gives rank r the two
    #    chunks that follow each other at r's place in the sequence. ValueError unless
    #    0 ≤ rank < world.
    # 2. step_work: at ring step s, rank r holds the keys of rank (r − s) mod p. Count the
    #    (query chunk, key chunk) pairs it must compute. Not causal: all of them. Causal: a
    #    chunk of queries sees a chunk of keys when the key chunk is not later in the
    #    sequence — and a pair on the diagonal is computed (masked inside).
    # 3. Check: zig-zag, step 0 costs 3 on every rank and every later step 2; contiguous,
    #    rank r's total is 4r + 3. ValueError for a layout other than the two.
    #
    # What is graded (tests/exercises/test_ch21_zigzag.py):
    #   - your chunks select exactly the tokens the real zigzag_shard gives each rank;
    #   - step_work against simulator/context_parallel.py (ring_kinds, STEP_WORK), and
    #     against a token-by-token count of the causal mask, for both layouts;
    #   - the balance: every zig-zag rank does 2p + 1 sub-blocks.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 21.2: implement zigzag_chunks in "
                              "exercises/ch21_zigzag.py")


def contiguous_chunks(rank: int, world: int) -> tuple[int, int]:
    """The two chunks rank ``rank`` holds when the sequence is split contiguously."""
    raise NotImplementedError("EXERCISE 21.2: implement contiguous_chunks in "
                              "exercises/ch21_zigzag.py")


def step_work(rank: int, world: int, causal: bool = True, layout: str = "zigzag") -> list[int]:
    """``c × c`` sub-blocks rank ``rank`` computes at each ring step ``s = 0 … world−1``, in
    ``layout`` ``"zigzag"`` or ``"contiguous"``."""
    raise NotImplementedError("EXERCISE 21.2: implement step_work in exercises/ch21_zigzag.py")
