"""Context parallelism from scratch on ``torch.distributed`` (book chapter 21): the sequence
is split over ranks, and attention — the one layer that mixes tokens — is computed exactly
anyway.

* :mod:`~backends.context_parallel.ring` — ring attention (Liu, Zaharia & Abbeel 2023): keys
  and values go round the ring block by block, each transfer posted before the block in hand
  is computed; online-softmax merge; causal masking on the zig-zag layout;
* :mod:`~backends.context_parallel.ulysses` — DeepSpeed Ulysses (Jacobs et al. 2023): two
  all-to-alls between sequence and head sharding around local attention;
* :mod:`~backends.context_parallel.blocks` — one block's attention with its log-sum-exp and
  its backward, the merge, the zig-zag layout;
* :mod:`~backends.context_parallel.measure` — the rank programs that time a step and the
  one-process profiles the simulated twin reads.
"""

from backends.context_parallel.blocks import zigzag_shard
from backends.context_parallel.ring import RingAttention, ring_attention
from backends.context_parallel.ulysses import sequence_shard, ulysses_attention

__all__ = ["RingAttention", "ring_attention", "sequence_shard", "ulysses_attention",
           "zigzag_shard"]
