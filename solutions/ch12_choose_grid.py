"""Chapter 12, reference answer: prune by Narayanan et al.'s rules, pick with the simulator.

The exercise is in ``exercises/ch12_choose_grid.py``. The rules of thumb alone — the smallest
model-parallel size that fits, all else data parallel — lose when the batch is small: with few
micro-batches per replica the data-parallel gradient all-reduce (not overlapped) costs more
than a pipeline bubble. So: keep t inside a node and the configurations that fit, try each
at micro-batch 1 (the smallest bubble) on the simulator, keep the fastest.
"""

from __future__ import annotations

from simulator.core.hardware import preset
from simulator.tensor_parallel import Grid, MegatronConfig, fits, simulate_megatron
from simulator.transformer import GPT

PEAK_FLOPS = 312e12  # A100 dense fp16 (the memory check needs no time)


def choose_grid(model: GPT, gpus: int, global_batch: int, gpu_memory_bytes: float
                ) -> tuple[int, int, int, int]:
    """The fastest fitting (t ≤ 8, p, d = gpus/(t·p)) at micro-batch 1."""
    cluster = preset("a100", gpus)
    best: tuple[float, tuple[int, int, int, int]] | None = None
    for t in (1, 2, 4, 8):
        for p in range(1, model.layers + 1):
            if (model.heads % t or model.layers % p or gpus % (t * p)
                    or global_batch % (gpus // (t * p))):
                continue
            config = MegatronConfig(model, Grid(t, p, gpus // (t * p)), global_batch, 1)
            if not fits(config, PEAK_FLOPS, gpu_memory_bytes):
                continue
            seconds = simulate_megatron(cluster, config).iteration_time_s
            if best is None or seconds < best[0]:
                best = (seconds, (t, p, gpus // (t * p), 1))
    if best is None:
        raise ValueError(f"{model.name} does not fit on {gpus} GPUs")
    return best[1]
