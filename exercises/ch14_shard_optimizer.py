"""Chapter 14 exercise: ZeRO stage 1 — shard the optimizer over the data-parallel ranks.

Every rank holds all parameters and, after backward, all of its own gradients, flattened into
one buffer padded to ``world · k`` elements. Stage 1 (textbook chapter 14) then

1. **reduce-scatters** the gradients: rank ``r`` ends with the *average* over all ranks of
   elements ``[r·k, (r+1)·k)`` — and only those;
2. steps the optimizer on that shard alone, so the optimizer's state (Adam: two buffers the
   size of the parameters) exists only for ``1/world`` of the model on each rank;
3. **all-gathers** the updated shards, so every rank again holds all parameters.

Grade your answer::

    make grade CH=14

and read ``solutions/ch14_shard_optimizer.py`` afterwards.
"""

from __future__ import annotations

import torch


def stage1_step(flat_param: torch.Tensor, flat_grad: torch.Tensor, shard: torch.nn.Parameter,
                optimizer: torch.optim.Optimizer) -> None:
    """One ZeRO-1 optimizer step, on every rank of the default process group.

    Args:
        flat_param: all parameters, flat, ``world · k`` elements (padding included); the
            model's parameters are views of it, so writing here updates the model.
        flat_grad: this rank's gradients in the same layout (not yet averaged).
        shard: ``flat_param[rank·k:(rank+1)·k]`` — a *view*, so stepping it writes into
            ``flat_param`` — as an ``nn.Parameter``; ``optimizer`` was built on ``[shard]``.
        optimizer: any ``torch.optim`` optimizer over ``[shard]``.
    """
    # ===== EXERCISE 14.2: ZeRO stage 1 ======================================================
    #
    # Points: 10 (in proportion to the tests of ex14_2 that pass; `make grade EX=14.2`)
    #
    # 1. k = shard.numel(). Reduce-scatter flat_grad so that this rank gets the SUM of its
    #    slice over all ranks: torch.distributed.reduce_scatter_single(output, input). Divide
    #    by the world size (torch.distributed.get_world_size()) to average, as DDP does.
    # 2. Put the result in shard.grad and call optimizer.step().
    # 3. All-gather the shards back into flat_param:
    #    torch.distributed.all_gather_single(output, input). The input must not alias the
    #    output: gather from shard.detach().clone().
    # 4. world size 1 must work too (the collectives then just copy).
    #
    # What is graded (tests/exercises/test_ch14_shard_optimizer.py, `make grade CH=14`):
    #   - on 1, 2 and 3 processes (parameter counts not divisible by 2 or 3), training a model
    #     with your step and Adam gives the same parameters as plain data-parallel training
    #     (every rank steps the full model on averaged gradients), within 1e-5;
    #   - each rank's Adam state holds only k elements per buffer.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 14.2: implement stage1_step in "
                              "exercises/ch14_shard_optimizer.py")
