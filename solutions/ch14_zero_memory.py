"""Chapter 14, reference answer: model states per device, stage by stage.

The exercise is in ``exercises/ch14_zero_memory.py``; the lab's own accounting is
:func:`simulator.zero.model_state_bytes`.
"""

from __future__ import annotations

STATE_BYTES = {"adam": 8, "momentum": 4, "sgd": 0}
"""Bytes per parameter of each optimizer's own fp32 state."""


def model_state_bytes(params: int, stage: int, dp: int, precision: str = "mixed",
                      optimizer: str = "adam") -> dict[str, int]:
    """Bytes of model states on one device (see the exercise for the arguments)."""
    if stage not in (0, 1, 2, 3) or dp < 1 or params < 0:
        raise ValueError(f"need stage 0–3, dp ≥ 1, params ≥ 0; got {stage}, {dp}, {params}")
    if precision not in ("mixed", "fp32") or optimizer not in STATE_BYTES:
        raise ValueError(f"unknown precision {precision!r} or optimizer {optimizer!r}")
    if precision == "mixed":  # fp16 weights and gradients; fp32 master copy + state
        per_param, per_grad, per_state = 2, 2, 4 + STATE_BYTES[optimizer]
    else:
        per_param, per_grad, per_state = 4, 4, STATE_BYTES[optimizer]
    shard = -(-params // dp)  # ⌈Ψ/N_d⌉: the padded shard

    def held(stage_that_shards: int) -> int:
        return shard if stage >= stage_that_shards else params

    parts = {"parameters": per_param * held(3), "gradients": per_grad * held(2),
             "optimizer": per_state * held(1)}
    return {**parts, "total": sum(parts.values())}
