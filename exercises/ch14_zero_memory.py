"""Chapter 14 exercise: how much memory the model states take per device, stage by stage.

ZeRO (Rajbhandari et al., SC 2020) counts the *model states* of data-parallel training — the
parameters, their gradients, and the optimizer's state — and shards them over the ``N_d``
data-parallel ranks: stage 1 the optimizer state, stage 2 the gradients too, stage 3 the
parameters too (textbook chapter 14). Here you compute the bytes one device holds.

Grade your answer::

    make grade CH=14

and read ``solutions/ch14_zero_memory.py`` afterwards.
"""

from __future__ import annotations


def model_state_bytes(params: int, stage: int, dp: int, precision: str = "mixed",
                      optimizer: str = "adam") -> dict[str, int]:
    """Bytes of model states on one device.

    Args:
        params: Ψ, the number of parameters (≥ 0).
        stage: the ZeRO stage, 0 (plain data parallelism), 1, 2 or 3.
        dp: N_d, the data-parallel ranks (≥ 1).
        precision: ``"mixed"`` (fp16 parameters and gradients, fp32 master weights in the
            optimizer) or ``"fp32"``.
        optimizer: ``"adam"`` (momentum and variance), ``"momentum"`` (SGD with one buffer)
            or ``"sgd"`` (no state).

    Returns:
        ``{"parameters": …, "gradients": …, "optimizer": …, "total": …}`` in bytes, for the
        device holding the largest shard when ``dp`` does not divide ``params``.
    """
    # ===== EXERCISE 14.1: model states per device ===========================================
    #
    # Points: 6 (in proportion to the tests of ex14_1 that pass; `make grade EX=14.1`)
    #
    # 1. Bytes per parameter of each state. Mixed precision: parameters 2, gradients 2, and the
    #    optimizer keeps an fp32 master copy (4) plus its own fp32 state (Adam: 4 + 4; momentum:
    #    4; SGD: nothing). fp32: parameters 4, gradients 4, optimizer state only (Adam 8,
    #    momentum 4, SGD 0). Check: mixed Adam is the paper's 2 + 2 + 12 = 16 bytes.
    # 2. A sharded state holds ⌈Ψ / N_d⌉ elements per device (pad to a multiple of N_d);
    #    a replicated one holds Ψ. Stage 1 shards the optimizer state, stage 2 also the
    #    gradients, stage 3 also the parameters.
    # 3. Raise ValueError for a stage outside 0–3, dp < 1, params < 0, or an unknown precision
    #    or optimizer.
    #
    # What is graded (tests/exercises/test_ch14_zero_memory.py, `make grade CH=14`):
    #   - the paper's Figure 1 numbers: Ψ = 7.5B, N_d = 64 → 120 GB, 31.4 GB, 16.6 GB, 1.9 GB;
    #   - every combination against the lab's simulator (simulator/zero.py) — derive first;
    #   - the bytes PyTorch really allocates: the lab's ZeRO (backends/zero.py) trains a model
    #     with fp32 Adam on 3 processes and counts its tensors; your numbers must match
    #     within 5 %.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 14.1: implement model_state_bytes in "
                              "exercises/ch14_zero_memory.py")
