r"""Megatron-LM's tensor (intra-layer) parallelism, from scratch on ``torch.distributed``.

Twin of :mod:`simulator.tensor_parallel` (book chapter 12). A transformer layer's matrix
multiplications are split over the ``t`` ranks of a *tensor-parallel group* (Shoeybi et al.,
"Megatron-LM", 2019, §3):

* the first linear layer of a block by **columns** (:class:`ColumnParallelLinear`: rank ``r``
  holds output features ``[r·n/t, (r+1)·n/t)``; attention: heads ``[r·a/t, (r+1)·a/t)``), the
  second by **rows** (:class:`RowParallelLinear`: input features of the same slice), so the
  nonlinearity (GeLU, softmax) between them needs no communication;
* the operator **f** (:class:`CopyToTensorParallel`) before a block: identity forward,
  all-reduce of the input's gradient backward; **g** (:class:`ReduceFromTensorParallel`) after
  it: all-reduce of the partial outputs forward, identity backward — two all-reduces per
  layer forward, two backward;
* the word embedding split by **vocabulary** (:class:`VocabParallelEmbedding`), tied with the
  output layer, whose logits stay split: :func:`vocab_parallel_cross_entropy` needs only two
  all-reduces of ``b·s`` numbers (max and sum) and one of the target's logit, never the
  ``b·s·V`` logits (§3, "input embedding").

**Sequence parallelism** (Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models", 2022, §4.2.2): the layer norms and dropouts between the blocks, which
tensor parallelism replicates, run on ``s/t`` of the sequence instead. ``g`` becomes a
reduce-scatter along the sequence (:class:`ReduceScatterToSequenceParallel`: reduce-scatter
forward, all-gather backward) and ``f`` its conjugate ``ḡ`` (:class:`GatherFromSequenceParallel`:
all-gather forward, reduce-scatter backward) — the same bytes as the all-reduce they replace
(an all-reduce is a reduce-scatter followed by an all-gather). The replicated parameters that
then see only a part of the sequence (layer norms, the row-parallel biases, the position
embedding) get partial gradients, summed over the group by :func:`finish_gradients`.

Activations are laid out ``[s, b, h]`` (sequence first, as Megatron), so a sequence shard is
a contiguous block. Process groups for a ``t × p × d`` grid are built as Megatron's
``initialize_model_parallel`` builds them (:func:`megatron_groups`, :func:`init_groups`).

Where each concept lives (one per module, as picotron):

* :mod:`~backends.tensor_parallel.groups` — the ``t × p × d`` process groups
  (:class:`ParallelGroups`, :func:`megatron_groups`, :func:`init_groups`, :func:`grid_sizes`);
* :mod:`~backends.tensor_parallel.communication` — the collectives on a group, and
  :class:`ProfileGroup`, the one-process stand-in that logs them;
* :mod:`~backends.tensor_parallel.operators` — f, g and their sequence-parallel forms
  (autograd Functions);
* :mod:`~backends.tensor_parallel.layers` — :class:`ColumnParallelLinear`,
  :class:`RowParallelLinear`, :class:`ParallelMLP`, :class:`ParallelSelfAttention`,
  :class:`VocabParallelEmbedding`;
* :mod:`~backends.tensor_parallel.cross_entropy` — :func:`vocab_parallel_cross_entropy`;
* :mod:`~backends.tensor_parallel.model` — :class:`GPTConfig`, the reference :class:`GPT` and
  :class:`ParallelGPT`;
* :mod:`~backends.tensor_parallel.shard` — :func:`shard_tensors`, :func:`load_shard`;
* :mod:`~backends.tensor_parallel.training` — :func:`finish_gradients`, :func:`train_step`,
  :func:`lm_batch`, :func:`batch_shard`.

and what the lab runs to time them (imported by module; nothing in them imports the lab):

* :mod:`~backends.tensor_parallel.point` — :class:`GridPoint`, a ``t × p × d`` point and the
  ops of its profile;
* :mod:`~backends.tensor_parallel.profile` — one rank's step with every collective a local
  stand-in: seconds of compute between collectives;
* :mod:`~backends.tensor_parallel.measure` — the timed real step (``measure_rank``), the
  probes, our MLP against DTensor's parallel styles (``mlp_speed_rank``) and the waiting
  primitive (``ring_steps``).

Units: sizes in elements, times in seconds.
"""

from backends.tensor_parallel.communication import ProfileGroup
from backends.tensor_parallel.cross_entropy import (
    VocabParallelCrossEntropy,
    vocab_parallel_cross_entropy,
)
from backends.tensor_parallel.groups import (
    Group,
    ParallelGroups,
    grid_sizes,
    init_groups,
    megatron_groups,
)
from backends.tensor_parallel.layers import (
    ColumnParallelLinear,
    ParallelMLP,
    ParallelSelfAttention,
    RowParallelLinear,
    VocabParallelEmbedding,
)
from backends.tensor_parallel.model import (
    GPT,
    Block,
    GPTConfig,
    ParallelBlock,
    ParallelGPT,
    gpt_parameters,
)
from backends.tensor_parallel.operators import (
    CopyToTensorParallel,
    GatherFromSequenceParallel,
    GatherFromTensorParallel,
    ReduceFromTensorParallel,
    ReduceScatterToSequenceParallel,
    ScatterToSequenceParallel,
    ScatterToTensorParallel,
    copy_to_tensor_parallel,
    gather_from_sequence_parallel,
    reduce_from_tensor_parallel,
    reduce_scatter_to_sequence_parallel,
)
from backends.tensor_parallel.shard import load_shard, shard_tensors
from backends.tensor_parallel.training import (
    batch_shard,
    finish_gradients,
    lm_batch,
    train_step,
)

__all__ = [
    "GPT", "Block", "ColumnParallelLinear", "CopyToTensorParallel", "GPTConfig",
    "GatherFromSequenceParallel", "GatherFromTensorParallel", "Group", "ParallelBlock",
    "ParallelGPT", "ParallelGroups", "ParallelMLP", "ParallelSelfAttention", "ProfileGroup",
    "ReduceFromTensorParallel", "ReduceScatterToSequenceParallel", "RowParallelLinear",
    "ScatterToSequenceParallel", "ScatterToTensorParallel", "VocabParallelCrossEntropy",
    "VocabParallelEmbedding", "batch_shard", "copy_to_tensor_parallel", "finish_gradients",
    "gather_from_sequence_parallel", "gpt_parameters", "grid_sizes", "init_groups",
    "lm_batch", "load_shard", "megatron_groups", "reduce_from_tensor_parallel",
    "reduce_scatter_to_sequence_parallel", "shard_tensors", "train_step",
    "vocab_parallel_cross_entropy",
]
