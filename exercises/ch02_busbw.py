"""Chapter 2 exercise: the bus-bandwidth factor of nccl-tests, derived.

NVIDIA's nccl-tests report two bandwidths for a collective on ``S`` bytes that took ``t``
seconds (textbook chapter 2, "Algorithm bandwidth and bus bandwidth", eq. eq-busbw)::

    algbw = S / t                  what the application sees
    busbw = algbw × f(operation, p) what each rank's link carried

``algbw`` falls as ``p`` grows even when every link runs flat out; ``busbw`` is scaled so that a
bandwidth-optimal algorithm on links of ``B`` bytes/s shows ``busbw = B`` for every ``p``. Here
you derive ``f``. ``S`` follows the textbook's table of what ``n`` means: the buffer on each rank
for broadcast, reduce and all-reduce; the *whole* gathered or scattered buffer (``p`` pieces) for
scatter, gather, all-gather and reduce-scatter; all that one rank sends for all-to-all.

Grade your answer::

    make grade CH=02

and read ``solutions/ch02_busbw.py`` afterwards.
"""

from __future__ import annotations

OPERATIONS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce",
              "scatter", "gather")
"""The collectives ``busbw_factor`` knows, named as in the lab (``lab.twins_collectives``)."""


def busbw_factor(operation: str, p: int) -> float:
    """The factor ``f`` with ``busbw = algbw × f`` for ``operation`` on ``p`` ranks.

    Args:
        operation: one of :data:`OPERATIONS`.
        p: the number of ranks, at least 1.

    Returns:
        ``f``, dimensionless (a plain float).

    Raises:
        ValueError: ``operation`` is not one of :data:`OPERATIONS`.
    """
    # ===== EXERCISE 2.3: the bus-bandwidth factor ==========================================
    #
    # Points: 4 (in proportion to the tests of ex02_3 that pass; `make grade EX=2.3`)
    #
    # The recipe: find the fewest bytes that some rank's link *must* carry, m(S, p); the best
    # possible time is t = m/B, so the best algbw is S/t = B·S/m. Choose f to turn that into
    # B:  f = m / S.
    #
    # Derive, then implement (write your derivation in comments, one line each):
    #   1. all_reduce: the lower bound eq-ar-lower-bound (textbook, "Lower bounds") says every
    #      element needs 2(p−1) transmissions, shared by p ranks. How many bytes must some rank
    #      send? What is f? Check: f = 1 for p = 2, 1.5 for p = 4.
    #   2. reduce_scatter and all_gather: S is the whole buffer of p pieces. Which pieces must
    #      enter (all-gather) or leave (reduce-scatter) each rank?
    #   3. all_to_all: of the p blocks a rank sends, one stays home.
    #   4. broadcast and reduce: all S bytes must leave (enter) the root — but with a
    #      *pipelined* chain every link carries S once, in parallel. What is f?
    #   5. scatter and gather: the root must send (receive) every piece but its own.
    #   6. p = 1: what does each formula give, and does it make sense (nothing moves)?
    #
    # Raise ValueError (naming the operations you know) for any other operation name.
    #
    # What is graded (tests/exercises/test_ch02_busbw.py, `make grade CH=02`):
    #   - your f equals nccl-tests' for every operation and p = 1 … 1024 (the lab's copy is in
    #     lab/nccl_tests.py — derive first, compare after);
    #   - an unknown operation raises ValueError;
    #   - sim vs formula: a bandwidth-optimal algorithm simulated on a switch with links of B
    #     bytes/s (ring all-reduce, ring reduce-scatter, ring all-gather, pairwise all-to-all,
    #     pipelined-chain broadcast, linear scatter and gather) shows busbw = B within 2 %
    #     with your f, for p = 2, 3, 4 and 8.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 2.3: implement busbw_factor in exercises/ch02_busbw.py")
