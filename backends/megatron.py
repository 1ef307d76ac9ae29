"""3D parallelism (Megatron-LM): a GPT trained on a ``t × p × d`` grid of real processes.

Twin of :mod:`simulator.tensor_parallel`'s iteration (book chapter 12). The three dimensions
compose as Megatron composes them (Narayanan et al., "Efficient Large-Scale Language Model
Training on GPU Clusters Using Megatron-LM", SC 2021, §2–3):

* **tensor** (``t``): every layer split over a tensor group (:mod:`backends.tensor_parallel`);
* **pipeline** (``p``): the layers cut into ``p`` stages run by the lab's own synchronous
  pipeline runtime (:class:`backends.pipeline.runtime.Pipeline`, 1F1B = PipeDream-Flush by
  default) on the rank's *pipeline group* — activations and their gradients go point to
  point to the previous / next stage's global rank in this pipeline. The first stage holds
  the word and position embeddings, the last the final layer norm and the output layer;
* **data** (``d``): each pipeline replica sees ``1/d`` of the batch, and the gradients are
  averaged over the data group after the pipeline flush.

**Tied embeddings across stages** (Megatron's "embedding group", SC 2021 §3; Shoeybi et al.
2019, §3): the output layer reuses the word-embedding matrix, but with ``p > 1`` the first
and last stage run on different ranks. Each keeps its own copy (identical at the start);
each computes only its part of the gradient (lookup on the first stage, logits on the last),
and one all-reduce over the pair ``{first, last}`` gives both the full gradient, so the
copies stay equal step after step.

The whole :class:`~backends.tensor_parallel.ParallelGPT` is built on every rank (it is
small); :func:`stages` wraps its pieces as one ``nn.Sequential`` (embedding, the blocks, the
head) for the pipeline to cut, so parameter names — and the sharding from the unsharded
reference (:func:`backends.tensor_parallel.load_shard`) — stay those of ``ParallelGPT``.

Units: sizes in elements; timing lives in :mod:`lab.tensor_parallel`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends import tensor_parallel as tp
from backends.pipeline.runtime import Pipeline
from backends.trace import Tracer


class EmbeddingStage(nn.Module):
    """The first pipeline layer: tokens ``[b, s]`` → ``[s, b, h]`` (:meth:`ParallelGPT.embed`)."""

    def __init__(self, model: tp.ParallelGPT) -> None:
        super().__init__()
        self.wte, self.wpe, self.drop = model.wte, model.wpe, model.drop
        self._embed = model.embed

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._embed(tokens)


class HeadStage(nn.Module):
    """The last pipeline layer: ``[s, b, h]`` → this rank's ``V/t`` logits
    (:meth:`ParallelGPT.head`), through the word embedding tied to :class:`EmbeddingStage`'s."""

    def __init__(self, model: tp.ParallelGPT) -> None:
        super().__init__()
        self.lnf, self.word = model.lnf, model.wte.weight
        self._head = model.head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._head(x)


def stages(model: tp.ParallelGPT) -> nn.Sequential:
    """``model`` as ``L + 2`` pipeline layers: embedding, ``L`` blocks, head."""
    return nn.Sequential(EmbeddingStage(model), *model.blocks, HeadStage(model))


def even_balance(layers: int, p: int) -> list[int]:
    """``layers`` pipeline layers over ``p`` stages, as evenly as possible (the first
    ``layers mod p`` stages one larger)."""
    if p < 1 or layers < p:
        raise ValueError(f"cannot cut {layers} pipeline layers (embedding, blocks, head) into "
                         f"{p} stages: every stage needs at least one")
    base, extra = divmod(layers, p)
    return [base + (k < extra) for k in range(p)]


@dataclass
class GridRank:
    """This rank's place in the grid: its groups and coordinates (Megatron's order,
    ``rank = pp·(t·d) + dp·t + tp``, :func:`backends.tensor_parallel.megatron_groups`)."""

    t: int
    p: int
    d: int
    tensor: Any
    pipeline: Any
    data: Any
    embedding: Any
    tp_rank: int
    pp_rank: int
    dp_rank: int

    @classmethod
    def create(cls, t: int, p: int) -> GridRank:
        """Build every group of the world (all ranks call it in the same order)."""
        world, rank = dist.get_world_size(), dist.get_rank()
        t_, p_, d = tp.grid_sizes(world, t, p)
        groups = tp.init_groups(t, p)
        return cls(t_, p_, d, groups["tensor"], groups["pipeline"], groups["data"],
                   groups.get("embedding"), rank % t, rank // (t * d), (rank // t) % d)

    @property
    def first(self) -> bool:
        return self.pp_rank == 0

    @property
    def last(self) -> bool:
        return self.pp_rank == self.p - 1


class GridGPT:
    """A :class:`~backends.tensor_parallel.ParallelGPT` trained on a ``t × p × d`` grid.

    Args:
        config: the GPT.
        grid: this rank's groups (:meth:`GridRank.create`).
        microbatches: ``m`` per step (per data-parallel replica).
        sequence_parallel: Korthikanti et al.'s sequence parallelism inside each stage.
        schedule: the pipeline schedule (``1f1b`` as Megatron, or ``gpipe``).
        balance: pipeline layers (embedding + blocks + head) per stage; even by default.
        tracer: where the pipeline's F/B/send/recv spans go.
    """

    def __init__(self, config: tp.GPTConfig, grid: GridRank, microbatches: int = 1,
                 sequence_parallel: bool = False, schedule: str = "1f1b",
                 balance: Sequence[int] | None = None, tracer: Tracer | None = None) -> None:
        self.grid = grid
        self.model = tp.ParallelGPT(config, grid.tensor, sequence_parallel)
        layers = stages(self.model)
        balance = list(balance) if balance is not None else even_balance(len(layers), grid.p)
        group = self.model.group

        def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return tp.vocab_parallel_cross_entropy(logits, target.t(), group).mean()

        self.pipeline = Pipeline(layers, balance, microbatches, schedule=schedule,
                                 checkpoint="never", loss_fn=loss_fn, group=grid.pipeline,
                                 tracer=tracer)

    def parameters(self) -> list[nn.Parameter]:
        """The parameters of this rank's stage (what its optimizer steps)."""
        return self.pipeline.parameters()

    def forward_backward(self, tokens: torch.Tensor, targets: torch.Tensor) -> float | None:
        """One pipeline flush of this replica's batch, then every gradient finished:
        sequence-parallel partials summed over the tensor group, the average over the data
        group, the tied embedding's two parts summed over the embedding group. Returns this
        replica's mean loss on the last stage's ranks, else ``None``."""
        g = self.grid
        loss = self.pipeline.step(tokens if g.first else None, targets if g.last else None)
        tp.finish_gradients(self.model, g.tensor, g.data)
        if g.embedding is not None:
            grad = self.model.wte.weight.grad
            if grad is None:
                raise RuntimeError(f"rank {dist.get_rank()} runs the first or last stage but "
                                   "its word embedding got no gradient")
            dist.all_reduce(grad, group=g.embedding)
        return loss

    def train_step(self, optimizer: torch.optim.Optimizer, tokens: torch.Tensor,
                   targets: torch.Tensor) -> float | None:
        """Zero the gradients, :meth:`forward_backward`, step; the loss (last stage)."""
        optimizer.zero_grad(set_to_none=True)
        loss = self.forward_backward(tokens, targets)
        optimizer.step()
        return loss
