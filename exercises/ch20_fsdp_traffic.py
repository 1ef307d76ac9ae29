"""Chapter 20 exercise: the bytes one FSDP rank sends per training step.

ZeRO-3 and FSDP trade memory for communication: a unit that is not kept whole must be
all-gathered before it computes — once more in backward if it was freed after forward — and
its gradients reduce-scattered (Rajbhandari et al., SC 2020, §7.2.2; Zhao et al., VLDB 2023,
§3.2.2 and §3.4; textbook chapter 20). Here you count those bytes per rank.

Grade your answer::

    make grade EX=20.2

and read ``solutions/ch20_fsdp_traffic.py`` afterwards.
"""

from __future__ import annotations


def traffic_bytes(unit_numels: list[int], world: int, reshard_after_forward: bool = True,
                  param_itemsize: int = 4, reduce_itemsize: int = 4) -> float:
    """Bytes one rank sends in one FSDP step.

    Args:
        unit_numels: parameters of each unit (each ≥ 1).
        world: ranks, ``N`` (≥ 1).
        reshard_after_forward: units freed after forward and gathered again for backward.
        param_itemsize: bytes per element of the gathered parameters (4 fp32, 2 bf16).
        reduce_itemsize: bytes per element of the gradients' reduce-scatter.

    Returns:
        Bytes sent per rank per step (a float: ``(N−1)/N`` of whole buffers).
    """
    # ===== EXERCISE 20.2: FSDP's traffic per rank ===========================================
    #
    # Points: 6 (in proportion to the tests of ex20_2 that pass; `make grade EX=20.2`)
    #
    # 1. A ring all-gather or reduce-scatter of a buffer of n bytes has each rank send
    #    (N−1)/N of n (chapter 2). FSDP's direct all-gather sends its shard to the N−1 others:
    #    the same bytes.
    # 2. The buffer is the unit's flat parameters padded to a multiple of N. Padding travels.
    # 3. How many all-gathers per unit per step, with and without resharding after forward?
    #    How many reduce-scatters? Which collective moves param_itemsize bytes per element and
    #    which reduce_itemsize?
    # 4. Check: fp32, N dividing every unit, Ψ parameters in all → 3·(N−1)/N·4Ψ resharding,
    #    2·(N−1)/N·4Ψ without. ValueError for world < 1, a unit < 1 or an item size < 1.
    #
    # What is graded (tests/exercises/test_ch20_fsdp_traffic.py):
    #   - ZeRO's 3Ψ and 2Ψ, one rank alone, padding, bf16 with fp32 reduction;
    #   - random units, worlds 1–64 and dtypes against simulator/fsdp.py.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 20.2: implement traffic_bytes in "
                              "exercises/ch20_fsdp_traffic.py")
