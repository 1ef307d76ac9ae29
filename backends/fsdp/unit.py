"""One FSDP unit: a module's parameters as one flat buffer, sharded over the ranks.

Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel", VLDB 2023,
§3.2 ("FlatParameter"). A **unit** is a module wrapped as one piece: its parameters are
flattened into one buffer of ``numel`` elements, padded with zeros to ``N·k`` elements
(``k = ⌈numel/N⌉``) so that it splits evenly over ``N`` ranks; rank ``r`` keeps only its
**shard**, elements ``[r·k, (r+1)·k)``, in memory of its own (fp32, the copy the optimizer
steps). Around each use the unit is **unsharded** — the shards all-gathered into ``full``, of
which the module's parameters are views — and **resharded** afterwards: ``full``'s storage
is given back, the views stay valid objects (autograd keeps them for backward) and are filled
again by the next all-gather. After backward the unit's gradients are flattened into one
padded buffer and **reduce-scattered**, so rank ``r`` keeps the average of its shard's
gradient (Rajbhandari et al., SC 2020, §5: the gather twice and the reduce-scatter once make
ZeRO-3's ``3Ψ`` traffic per step).

Mixed precision (FSDP §3.4, :class:`MixedPrecision`): the shard stays fp32; it is cast to
``param_dtype`` before the all-gather, so the gathered unit, the compute and the fresh
gradients are in ``param_dtype``; the gradients are cast to ``reduce_dtype`` for the
reduce-scatter, and the reduced shard lands in the fp32 shard's gradient.

The all-gather is posted whole at once — each rank sends its shard to every other rank and
receives theirs straight into ``full`` (the same ``(N−1)/N`` of the buffer per rank as a
ring) — and waited for later, so that :class:`backends.fsdp.FSDP` can *prefetch*: issue a
unit's gather, compute another unit, and wait only when the unit is needed. The
reduce-scatter is the lab's ring (chapter 2), in place in a flat buffer kept from step to
step, so neither collective allocates during the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.collectives.comm import Comm
from backends.collectives.reduce_scatter import ring_reduce_scatter_chunks
from backends.device import device
from simulator.collectives.chunks import chunk_bounds


@dataclass(frozen=True)
class MixedPrecision:
    """Dtypes of a step (FSDP §3.4): ``param_dtype`` for the gathered parameters, the compute
    and the fresh gradients; ``reduce_dtype`` for the gradients' reduce-scatter. ``None``: the
    shard's own dtype (fp32)."""

    param_dtype: torch.dtype | None = None
    reduce_dtype: torch.dtype | None = None


def padded_numel(numel: int, world: int) -> int:
    """``numel`` rounded up to a multiple of ``world`` (``world·⌈numel/world⌉``), elements."""
    return -(-numel // world) * world


@dataclass
class FlatUnit:
    """One unit's parameters, flattened (see the module docstring).

    ``full`` holds ``padded`` elements in the compute dtype while the unit is unsharded (empty
    storage otherwise); ``shard`` this rank's ``shard_numel`` fp32 elements; ``pending`` the
    in-flight all-gather and the cast shard it sends."""

    index: int
    module: nn.Module
    params: list[nn.Parameter]
    offsets: list[int]
    numel: int
    shard_numel: int
    full: torch.Tensor
    shard: nn.Parameter
    pending: tuple[list[Any], torch.Tensor] | None = None
    ready: set[int] = field(default_factory=set)
    reduced: bool = False

    @property
    def padded(self) -> int:
        """Elements of the padded flat buffer (``world·shard_numel``)."""
        return self.full.numel()

    @property
    def unsharded(self) -> bool:
        """Whether ``full`` has storage (gathered, or being gathered)."""
        return self.full.untyped_storage().nbytes() > 0


def flatten(index: int, module: nn.Module, params: list[nn.Parameter], world: int, rank: int,
            compute_dtype: torch.dtype | None) -> FlatUnit:
    """``params`` of ``module`` as a :class:`FlatUnit`: the fp32 shard of this ``rank`` copied
    out, the parameters re-homed as views of ``full`` (``compute_dtype``, default theirs)."""
    dtype = params[0].dtype
    if any(p.dtype != dtype for p in params):
        raise ValueError(f"unit {type(module).__name__} mixes parameter dtypes")
    offsets, numel = [], 0
    for p in params:
        offsets.append(numel)
        numel += p.numel()
    shard_numel = padded_numel(numel, world) // world
    flat = torch.zeros(shard_numel * world, dtype=dtype, device=device())
    with torch.no_grad():
        for p, off in zip(params, offsets, strict=True):
            flat[off:off + p.numel()].copy_(p.detach().reshape(-1))
    shard = nn.Parameter(flat[rank * shard_numel:(rank + 1) * shard_numel].clone())
    full = flat.to(compute_dtype or dtype)
    for p, off in zip(params, offsets, strict=True):
        p.data = full[off:off + p.numel()].view_as(p)
    return FlatUnit(index, module, params, offsets, numel, shard_numel, full, shard)


def reshard(unit: FlatUnit) -> None:
    """Give back ``unit``'s full parameters (the views stay, their storage goes)."""
    unit.full.untyped_storage().resize_(0)


GATHER_TAG = 1
"""Message tag of the all-gathers (unit ``i`` uses ``GATHER_TAG + i``): apart from the ring
reduce-scatter's tag 0, so a prefetched gather in flight never meets a reduce-scatter."""


def unshard(unit: FlatUnit, comm: Comm) -> None:
    """Issue ``unit``'s all-gather: ``full`` re-allocated, this rank's shard (cast to the
    compute dtype) copied into its slice and sent to every other rank, every other rank's
    shard received straight into its slice — all posted at once, nothing waited for
    (:func:`wait_unsharded` waits), so the gather runs while this rank computes."""
    if unit.unsharded:
        return
    unit.full.untyped_storage().resize_(unit.padded * unit.full.element_size())
    k, r = unit.shard_numel, comm.rank
    sent = unit.shard.detach().to(unit.full.dtype)  # a copy only when the dtypes differ
    with torch.no_grad():
        unit.full[r * k:(r + 1) * k].copy_(sent)
    tag = GATHER_TAG + unit.index
    works = [comm.irecv(src, unit.full[src * k:(src + 1) * k], tag)
             for src in range(comm.world_size) if src != r]
    works += [comm.isend(dst, sent, tag) for dst in range(comm.world_size) if dst != r]
    unit.pending = (works, sent)


def wait_unsharded(unit: FlatUnit) -> None:
    """Wait for ``unit``'s all-gather (if one is in flight) and drop the cast shard."""
    if unit.pending is not None:
        for work in unit.pending[0]:
            work.wait()
        unit.pending = None


def reduce_scatter_grads(unit: FlatUnit, comm: Comm, reduce_dtype: torch.dtype | None,
                         scratch: torch.Tensor) -> None:
    """Average ``unit``'s gradients over the team into its shard's gradient: flatten them
    (cast to ``reduce_dtype``, default the shard's dtype) into the first ``padded`` elements
    of ``scratch`` (a buffer kept from step to step), free the parameters' gradients, ring
    reduce-scatter in place (:mod:`backends.collectives.reduce_scatter`, sum, then ÷ ``N``)
    and add this rank's chunk to ``shard.grad`` (kept allocated between steps)."""
    flat = scratch[:unit.padded]
    flat[unit.numel:].zero_()
    for p, off in zip(unit.params, unit.offsets, strict=True):
        view = flat[off:off + p.numel()]
        if p.grad is None:
            view.zero_()
        else:
            view.copy_(p.grad.reshape(-1))
            p.grad = None
    p_, k = comm.world_size, unit.shard_numel
    ring_reduce_scatter_chunks(comm, flat, chunk_bounds(unit.padded, p_), dist.ReduceOp.SUM)
    mine = flat[comm.rank * k:(comm.rank + 1) * k]
    mine.div_(p_)
    if unit.shard.grad is None:
        unit.shard.grad = mine.to(unit.shard.dtype, copy=True)
    else:
        unit.shard.grad.add_(mine)
