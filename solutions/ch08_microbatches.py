"""Chapter 8, reference answer: the number of micro-batches for a memory budget.

The exercise is in ``exercises/ch08_microbatches.py``; the simulator accounts the same memory
in :func:`simulator.pipeline.simulate_pipeline` (``peak_activation_bytes``).
"""

from __future__ import annotations


def choose_microbatches(batch: int, stages: int, activation_bytes_per_sample: int,
                        input_bytes_per_sample: int, budget_bytes: int, schedule: str,
                        checkpoint: str) -> int | None:
    """The fewest micro-batches whose peak activation memory fits (see the exercise)."""
    for m in range(1, batch + 1):
        if batch % m:
            continue
        samples = batch // m
        # In flight at once: GPipe holds all m (every forward before any backward); 1F1B holds
        # min(p − r, m) on stage r, the most on stage 0.
        in_flight = m if schedule == "gpipe" else min(stages, m)
        if checkpoint == "never":
            peak = in_flight * samples * activation_bytes_per_sample
        else:  # checkpoints of every micro-batch in flight, one recomputed in full
            peak = (in_flight * samples * input_bytes_per_sample
                    + samples * activation_bytes_per_sample)
        if peak <= budget_bytes:
            return m
    return None
