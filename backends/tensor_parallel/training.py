"""One training iteration of a tensor- (and data-) parallel GPT: batches, the gradient
finishing after backward (Korthikanti et al. 2022, §4.2.2; data-parallel averaging), the
optimizer step. Losses in nats."""

from __future__ import annotations

import torch
from torch import nn

from backends.device import device
from backends.tensor_parallel.communication import _all_reduce_, _size
from backends.tensor_parallel.groups import Group
from backends.tensor_parallel.model import GPTConfig, ParallelGPT
from backends.trace import Tracer, span


def finish_gradients(model: nn.Module, tensor_group: Group = None,
                     data_group: Group | None = None) -> None:
    """After backward: sum the sequence-parallel parameters' partial gradients over the
    tensor group (Korthikanti et al. §4.2.2), then average every gradient over the data
    group (data parallelism, when ``data_group`` has more than one rank)."""
    partial = [p.grad for p in model.parameters()
               if p.grad is not None and getattr(p, "sequence_parallel", False)]
    if partial and _size(tensor_group) > 1:
        _all_reduce_flat(partial, tensor_group)  # one coalesced all-reduce, as Megatron
    if data_group is not None and _size(data_group) > 1:
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        _all_reduce_flat(grads, data_group, 1 / _size(data_group))


def _all_reduce_flat(grads: list[torch.Tensor], group: Group, scale: float = 1.0) -> None:
    """Sum ``grads`` over ``group`` through one flat buffer, times ``scale``, in place."""
    flat = torch.cat([g.reshape(-1) for g in grads])
    _all_reduce_(flat, group)
    if scale != 1.0:
        flat *= scale
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def batch_shard(tokens: torch.Tensor, d: int, dp_rank: int) -> torch.Tensor:
    """This data-parallel replica's ``1/d`` of a batch (dim 0)."""
    if tokens.shape[0] % d:
        raise ValueError(f"batch {tokens.shape[0]} does not split over {d} data-parallel "
                         "replicas")
    return tokens.chunk(d, dim=0)[dp_rank]


def lm_batch(c: GPTConfig, batch: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A deterministic language-modelling batch: tokens ``[batch, s]`` and the next tokens,
    drawn on the CPU and placed on the rank's device (:func:`backends.device.device`)."""
    gen = torch.Generator().manual_seed(seed)
    seqs = torch.randint(0, c.vocab, (batch, c.seq + 1), generator=gen).to(device())
    return seqs[:, :-1].contiguous(), seqs[:, 1:].contiguous()


def train_step(model: ParallelGPT, optimizer: torch.optim.Optimizer, tokens: torch.Tensor,
               targets: torch.Tensor, data_group: Group | None = None,
               tracer: Tracer | None = None) -> float:
    """One iteration on this replica's batch: forward, loss, backward, gradient finishing,
    optimizer step; returns the loss (nats). ``tracer``: a span per phase (``compute``
    forward and backward — the tensor group's collectives inside them —, ``allreduce``
    gradients, ``compute`` optimizer); ``None``: untraced."""
    optimizer.zero_grad(set_to_none=True)
    with span(tracer, "compute", "forward"):
        loss = model.loss(tokens, targets)
    with span(tracer, "compute", "backward"):
        loss.backward()  # type: ignore[no-untyped-call]
    with span(tracer, "allreduce", "gradients"):
        finish_gradients(model, model.group, data_group)
    with span(tracer, "compute", "optimizer"):
        optimizer.step()
    return float(loss.detach())
