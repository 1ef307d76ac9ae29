"""Chapter 21 exercise: what DeepSpeed Ulysses' all-to-alls move.

Ulysses (Jacobs et al. 2023, §3.1; textbook chapter 21) gives each of ``p`` ranks ``S/p``
consecutive tokens of ``q, k, v`` (shape ``(batch, heads, S/p, dim)``). Attention mixes tokens
but never heads, so an all-to-all trades the sequence split for a head split, every rank
attends over the *whole* sequence for its share of the heads, and a second all-to-all trades
back. The backward runs the same two all-to-alls the other way round.

Grade your answer::

    make grade EX=21.3

and read ``solutions/ch21_ulysses.py`` afterwards.
"""

from __future__ import annotations


def head_sharded_shape(batch: int, heads: int, seq: int, dim: int, world: int
                       ) -> tuple[int, int, int, int]:
    """Shape of a rank's ``q`` after the sequence-to-heads all-to-all (``seq``, ``heads``:
    the whole sequence's)."""
    # ===== EXERCISE 21.3: Ulysses' all-to-all shapes and bytes ==============================
    #
    # Points: 6 (in proportion to the tests of ex21_3 that pass; `make grade EX=21.3`)
    #
    # Two functions: head_sharded_shape and traffic_bytes.
    # 1. The shape: which dimension shrinks by p and which grows by p? The element count a
    #    rank holds does not change. ValueError unless world ≥ 1 divides heads and seq.
    # 2. traffic_bytes: let A be the bytes of one of a rank's q, k, v. In an all-to-all of n
    #    bytes a rank keeps 1/p of them (the piece for itself) and sends the rest. Count the
    #    all-to-alls of a step and what each carries: forward, q, k and v travel together,
    #    then the output comes back; backward, the output's gradient goes out and the
    #    gradients of q, k and v come back. An integer: p divides A whenever p divides heads.
    # 3. Check: with S/p fixed the bytes per rank stay flat as p grows — Jacobs et al.'s point
    #    (ring attention's grow with p).
    #
    # What is graded (tests/exercises/test_ch21_ulysses.py):
    #   - traffic against simulator/context_parallel.py (ulysses_traffic_bytes), random shapes;
    #   - the shape and the bytes every message of a real Ulysses step carries, counted on
    #     2 processes (backends/context_parallel/ulysses.py).
    # =======================================================================================
    raise NotImplementedError("EXERCISE 21.3: implement head_sharded_shape in "
                              "exercises/ch21_ulysses.py")


def traffic_bytes(batch: int, heads: int, seq: int, dim: int, world: int,
                  itemsize: int = 4) -> int:
    """Bytes one rank sends in one step of Ulysses attention, forward and backward."""
    raise NotImplementedError("EXERCISE 21.3: implement traffic_bytes in "
                              "exercises/ch21_ulysses.py")
