"""Chapter 2, reference answer: the bus-bandwidth factor of nccl-tests, derived.

The exercise is in ``exercises/ch02_busbw.py``; the lab uses the same factors in
``lab/nccl_tests.py`` (NVIDIA nccl-tests, ``doc/PERFORMANCE.md``).
"""

from __future__ import annotations

OPERATIONS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce",
              "scatter", "gather")
"""The collectives ``busbw_factor`` knows, named as in the lab (``lab.twins_collectives``)."""


def busbw_factor(operation: str, p: int) -> float:
    """The factor ``f`` with ``busbw = algbw × f`` for ``operation`` on ``p`` ranks.

    ``f = m / S``, where ``m`` is the fewest bytes some rank's link must carry for an operation
    on ``S`` bytes: a bandwidth-optimal algorithm then takes ``t = m/B`` on links of ``B``
    bytes/s, its algbw is ``S/t = B·S/m``, and ``algbw × f = B`` whatever ``p``.
    """
    if operation not in OPERATIONS:
        raise ValueError(f"unknown operation {operation!r}; choose one of "
                         f"{', '.join(OPERATIONS)}")
    if operation == "all_reduce":
        # Every element needs 2(p−1) transmissions (textbook eq. eq-ar-lower-bound: p−1 to
        # gather all inputs somewhere, p−1 more to hand the result to everyone else). Spread
        # over p ranks, some rank sends m = 2(p−1)/p·S bytes, so f = 2(p−1)/p.
        return 2 * (p - 1) / p
    if operation in ("reduce_scatter", "all_gather", "all_to_all", "scatter", "gather"):
        # S is p pieces of S/p. All-gather: each rank lacks the p−1 pieces of the others and
        # must receive them. Reduce-scatter: each rank must get the others' contributions to
        # its piece, (p−1)·S/p bytes in (and sends as many out). All-to-all: of the p blocks a
        # rank sends, the one for itself stays home. Scatter (gather): the root sends (receives)
        # every piece but its own. Each time m = (p−1)/p·S, so f = (p−1)/p.
        return (p - 1) / p
    # Broadcast and reduce: all S bytes must leave (enter) the root, m = S. A pipelined chain
    # reaches it: every link carries S once, all links at once, so f = 1 for every p.
    return 1.0
