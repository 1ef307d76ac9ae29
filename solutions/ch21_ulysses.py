"""Chapter 21 exercise, reference answer: what DeepSpeed Ulysses' all-to-alls move.

See ``exercises/ch21_ulysses.py`` for the task.
"""

from __future__ import annotations


def head_sharded_shape(batch: int, heads: int, seq: int, dim: int, world: int
                       ) -> tuple[int, int, int, int]:
    """Shape of a rank's ``q`` after the sequence-to-heads all-to-all."""
    if world < 1 or heads % world or seq % world:
        raise ValueError(f"Ulysses needs heads and seq divisible by world = {world}")
    return batch, heads // world, seq, dim


def traffic_bytes(batch: int, heads: int, seq: int, dim: int, world: int,
                  itemsize: int = 4) -> int:
    """Bytes one rank sends in one step of Ulysses attention, forward and backward."""
    head_sharded_shape(batch, heads, seq, dim, world)
    a = batch * heads * (seq // world) * dim * itemsize  # one of q, k, v on a rank
    per_all_to_all = [3 * a, a, a, 3 * a]  # q,k,v out; output back; their gradients
    return sum(n * (world - 1) // world for n in per_all_to_all)
