"""Chapter 7 exercise: tensor fusion — pack the tensors ready in one cycle into fused all-reduces.

Every cycle, Horovod's coordinator lists the tensors that all ranks have ready, in the agreed
order, and ``FuseResponses`` (``horovod/common/controller.cc``) packs them into as few
all-reduces as the fusion threshold allows, so that the latency α is paid once per group
instead of once per tensor (textbook chapter 7, "The fusion framework" and "Logic").

Grade your answer::

    make grade CH=07

and read ``solutions/ch07_fusion.py`` afterwards. The real engine's version is
``backends.horovod.fusion.fuse_responses``; the simulator's, ``simulator.horovod.fusion``.
"""

from __future__ import annotations

from collections.abc import Sequence


def fuse_responses(ready: Sequence[tuple[str, str, int]], threshold_bytes: int
                   ) -> list[list[str]]:
    """Group the tensors ready in one cycle into fused all-reduces, in order.

    Args:
        ready: ``(name, dtype, nbytes)`` per ready tensor, in the agreed order; ``dtype`` a
            string such as ``"float32"``, ``nbytes`` the tensor's size in bytes.
        threshold_bytes: the fusion threshold, bytes (``HOROVOD_FUSION_THRESHOLD``); 0 turns
            fusion off.

    Returns:
        The names of each fused all-reduce, in execution order; every name exactly once.
    """
    # ===== EXERCISE 7.1: fusion packing (Horovod's FuseResponses) ============================
    #
    # Points: 8 (in proportion to the tests of ex07_1 that pass; `make grade EX=7.1`)
    #
    # Keep a queue of the tensors not placed yet, in order. While it is not empty:
    #   1. the first tensor of the queue opens a group; size = its bytes (a tensor larger
    #      than the threshold is reduced alone: nothing else will fit);
    #   2. walk the tensors after it, in order:
    #        - same dtype as the first AND size + nbytes <= threshold: it joins the group
    #          (size += nbytes) and leaves the queue;
    #        - otherwise it is skipped: skipped += nbytes; if size + skipped <= threshold, set
    #          it aside and keep looking ahead; else stop the walk (it stays in the queue);
    #   3. put the set-aside tensors back at the front of the queue, in their order.
    #
    # Example, threshold 100 B:
    #   a float32 40, b float64 30, c float32 50, d float32 20, e float64 10
    #   → [["a", "c"], ["b", "e"], ["d"]]
    #   (a opens; b skipped (30); c joins (90); d does not fit and 90+30+20 > 100: stop.
    #    Then b opens; d skipped; e joins. Then d alone.)
    #
    # Why the look-ahead: mixed-precision training interleaves fp16 and fp32 gradients; without
    # it every group would break at each change of dtype. Why it is bounded: a group must not
    # wait on tensors far behind it.
    #
    # What is graded (tests/exercises/test_ch07_fusion.py, `make grade CH=07`):
    #   - the literal cases above and in the chapter (fusion off, one dtype, mixed precision, a
    #     tensor over the threshold, an exact fit);
    #   - hundreds of seeded random cycles against the real engine's rule
    #     (backends.horovod.fusion.fuse_responses): the same groups, in the same order;
    #   - your plan run on 2 real processes: each group packed into one buffer, all-reduced
    #     once, unpacked — equal to all-reducing every tensor alone.
    # =========================================================================================
    raise NotImplementedError("EXERCISE 7.1: implement fuse_responses in exercises/ch07_fusion.py")
