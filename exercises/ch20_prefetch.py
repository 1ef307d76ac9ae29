"""Chapter 20 exercise: in which order FSDP issues its all-gathers.

FSDP hides its all-gathers behind compute by *prefetching* (Zhao et al., VLDB 2023, §3.3.2):
before unit ``i`` computes in forward it issues unit ``i+1``'s gather, and before unit ``i``
computes in backward, unit ``i−1``'s. Whether a unit must be gathered again for backward
depends on ``reshard_after_forward`` (§3.2.2). The lab's :class:`backends.fsdp.FSDP` logs
every gather it issues and every compute it begins (textbook chapter 20); here you write that
log down before it happens.

Grade your answer::

    make grade EX=20.3

and read ``solutions/ch20_prefetch.py`` afterwards.
"""

from __future__ import annotations


def gather_order(units: int, reshard_after_forward: bool = True, prefetch: bool = True
                 ) -> list[tuple[str, int]]:
    """The events of one training step of FSDP over ``units`` units (numbered in forward
    order, from 0), in the order they happen.

    Returns:
        ``("gather", i)`` when unit ``i``'s all-gather is issued, ``("forward", i)`` and
        ``("backward", i)`` when its forward or backward compute begins.
    """
    # ===== EXERCISE 20.3: the prefetch order of all-gathers =================================
    #
    # Points: 6 (in proportion to the tests of ex20_3 that pass; `make grade EX=20.3`)
    #
    # Play the step unit by unit, keeping the set of units that are gathered (or being
    # gathered). A unit already in that set is never gathered twice.
    # 1. Forward, i = 0, 1, …: the pre-forward hook gathers unit i (waits for it), then — if
    #    prefetching — issues the gather of the unit after it, then unit i computes. The
    #    post-forward hook frees unit i only with reshard_after_forward.
    # 2. Backward, in reverse: the same with the unit *before* it; after its backward the
    #    gradients are reduce-scattered and the unit is freed.
    # 3. Check the counts: each unit is gathered twice per step with resharding, once without.
    # 4. ValueError for fewer than one unit.
    #
    # What is graded (tests/exercises/test_ch20_prefetch.py):
    #   - one unit, by hand; every compute comes after its unit's gather, and the counts;
    #   - the log the real FSDP keeps on 2 processes, 3 and 4 units, every configuration.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 20.3: implement gather_order in "
                              "exercises/ch20_prefetch.py")
