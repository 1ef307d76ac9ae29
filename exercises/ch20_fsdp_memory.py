"""Chapter 20 exercise: the most bytes one FSDP rank holds during a training step.

FSDP (Zhao et al., VLDB 2023, §3) keeps only a ``1/N`` shard of every unit between uses and
gathers a unit whole just while it computes (textbook chapter 20). Its memory is therefore
*what a rank keeps* plus *the most the step gathers and allocates at once* — and that second
part depends on ``reshard_after_forward`` and on prefetching. Here you compute it for an fp32
step, activations left out, exactly as :mod:`simulator.fsdp` counts it.

Grade your answer::

    make grade EX=20.1

and read ``solutions/ch20_fsdp_memory.py`` afterwards.
"""

from __future__ import annotations


def peak_bytes(unit_numels: list[int], world: int, reshard_after_forward: bool = True,
               prefetch: bool = True, optimizer: str = "adam") -> int:
    """Peak bytes of one rank of FSDP in one fp32 step (activations not counted).

    Args:
        unit_numels: parameters of each unit, in forward order (each ≥ 1).
        world: ranks the units are sharded over, ``N`` (≥ 1).
        reshard_after_forward: free each unit after its forward, gather it again for backward.
        prefetch: issue the next unit's all-gather before the current unit computes (in
            backward: the previous unit's).
        optimizer: ``"adam"``, ``"momentum"`` or ``"sgd"``.

    Returns:
        The most bytes the rank holds at any moment of the step.
    """
    # ===== EXERCISE 20.1: FSDP's peak memory per rank =======================================
    #
    # Points: 10 (in proportion to the tests of ex20_1 that pass; `make grade EX=20.1`)
    #
    # 1. Kept from step to step. A unit of Ψ_u parameters is padded to N·⌈Ψ_u/N⌉ elements; the
    #    rank keeps its shard of ⌈Ψ_u/N⌉, that shard's gradient, and the optimizer's state of
    #    it (fp32: Adam's two moments, momentum's one buffer, plain SGD nothing). It also keeps
    #    one flat gradient buffer that every unit's gradients are reduce-scattered in: how big
    #    must it be to fit any unit?
    # 2. Forward. A gathered unit is its padded buffer. With reshard_after_forward, what is
    #    gathered at the moment unit i computes — without prefetching, and with unit i+1's
    #    gather already issued? Without resharding nothing is freed until backward.
    # 3. Backward. Unit i's compute allocates fresh gradients for its Ψ_u parameters (not
    #    padded) while the unit is gathered (and, prefetching, unit i−1 too). After the
    #    reduce-scatter the gradients and the gathered unit go. Without resharding, which units
    #    are still gathered when unit i's backward runs?
    # 4. The optimizer. torch.optim's single-tensor Adam makes two shard-sized temporaries per
    #    tensor and one of them outlives its tensor until the next tensor's are made; SGD and
    #    momentum update in place. Which pair of neighbouring shards makes the largest sum?
    # 5. The answer is (1) plus the largest of (2), (3) and (4). ValueError for world < 1, no
    #    units, a unit of < 1 parameter, or an unknown optimizer.
    #
    # What is graded (tests/exercises/test_ch20_fsdp_memory.py):
    #   - one unit on one rank, worked by hand;
    #   - random units, worlds 1–8, every configuration, against simulator/fsdp.py — exactly;
    #   - the peak the lab's real FSDP (backends/fsdp/) reaches in an Adam step on 2 processes,
    #     measured from the allocator's own events, within 1 %.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 20.1: implement peak_bytes in "
                              "exercises/ch20_fsdp_memory.py")
