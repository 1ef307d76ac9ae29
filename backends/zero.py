"""ZeRO stages 1, 2 and 3 from scratch on ``torch.distributed`` (book chapter 14).

Twin of :mod:`simulator.zero` (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models", SC 2020). Plain data parallelism keeps every model state on every
rank; :class:`Zero` keeps each rank's ``1/N_d`` share instead:

* **stage 1** — the optimizer state. Every rank still holds all parameters and all gradients;
  after backward the gradients are *reduce-scattered* (averaged) so rank ``r`` holds the
  average of its shard, it steps the optimizer on that shard only, and the updated shards are
  *all-gathered* back into the full parameters.
* **stage 2** — the gradients too. As soon as backward has produced every gradient of a unit,
  the unit's gradients are reduce-scattered and the full gradients freed, so only the shard's
  gradient survives the backward pass.
* **stage 3** — the parameters too. Between uses only the shard exists; a unit's full
  parameters are all-gathered just before its forward, freed after it, all-gathered again just
  before its backward (a hook on the unit's output gradient) and freed once its gradients are
  reduce-scattered: 1.5× the traffic of stages 1–2.

The model is cut into **units** — each submodule that owns parameters directly, like an FSDP
unit or a ZeRO-3 "module": a unit's parameters live in one flat buffer padded to a multiple of
``N_d`` elements, and rank ``r`` owns elements ``[r·k, (r+1)·k)`` of every unit, so any parameter
count works. The optimizer is any ``torch.optim`` class; it sees one flat shard per unit, so its
state is sharded for free. Collectives are the lab's own ring reduce-scatter and all-gather
(:mod:`backends.collectives`), so chapter 2 is what moves the bytes.

Parameters shared between units (tied weights) are supported at stages 1 and 2 and refused at
stage 3, where a freed unit could still be read by another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.collectives.all_gather import ring_all_gather_chunks
from backends.collectives.all_reduce import ring_all_reduce
from backends.collectives.comm import Comm, Group
from backends.collectives.reduce_scatter import ring_reduce_scatter_chunks
from backends.device import device, on_device, to_device
from backends.trace import Tracer, span
from simulator.collectives.chunks import chunk_bounds


@dataclass
class Unit:
    """The parameters of one submodule, flattened: ``full`` (padded to ``world·shard_numel``
    elements) holds every element, ``shard`` rank ``r``'s slice; parameters are views of ``full``.
    """

    index: int
    module: nn.Module
    params: list[nn.Parameter]
    offsets: list[int]
    numel: int
    shard_numel: int
    full: torch.Tensor
    shard: nn.Parameter
    grad_full: torch.Tensor | None = None
    ready: set[int] = field(default_factory=set)
    reduced: bool = False

    @property
    def padded(self) -> int:
        """Elements of the padded flat buffer."""
        return self.full.numel()


class Zero:
    """Data-parallel training with ZeRO ``stage`` (0–3) on ``module`` and any optimizer.

    Use like a module plus its optimizer::

        zero = Zero(model, torch.optim.Adam, stage=2, lr=1e-3)
        loss = loss_fn(zero(x), y)
        loss.backward()
        zero.step()
        zero.zero_grad()

    Stage 0 is plain data parallelism done the same way (one all-reduce of each unit's
    gradients, the optimizer on every element), to compare against. Parameters (and buffers)
    start as rank 0's, broadcast as DDP does.

    Args:
        module: the model; moved to the rank's device (:func:`backends.device.device`, where
            :meth:`__call__` moves the inputs too), its parameters re-homed into flat buffers
            there (in place).
        optimizer_class: e.g. ``torch.optim.Adam``; ``optimizer_kwargs`` go to it.
        stage: 0, 1, 2 or 3.
        group: the data-parallel team (default: the world).
        tracer: records spans of each collective (see :mod:`backends.trace`).
    """

    def __init__(self, module: nn.Module, optimizer_class: type[torch.optim.Optimizer],
                 stage: int = 1, group: Group = None, tracer: Tracer | None = None,
                 **optimizer_kwargs: Any) -> None:
        if stage not in (0, 1, 2, 3):
            raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage}")
        self.module, self.stage, self.tracer = on_device(module), stage, tracer
        self.comm = Comm(group, tracer)
        self.world, self.rank = self.comm.world_size, self.comm.rank
        self.units = self._build_units()
        dtype = self.units[0].full.dtype
        self._scratch = torch.empty(0 if stage <= 1 else max(u.padded for u in self.units),
                                    dtype=dtype, device=device())
        self._hooks: list[Any] = []
        self._broadcast_initial_state()
        if stage >= 2:
            for unit in self.units:
                for i, p in enumerate(unit.params):
                    self._hooks.append(p.register_post_accumulate_grad_hook(
                        self._grad_ready(unit, i)))  # type: ignore[no-untyped-call]
        if stage == 3:
            for unit in self.units:
                self._hooks.append(unit.module.register_forward_pre_hook(self._pre_forward(unit)))
                self._hooks.append(unit.module.register_forward_hook(self._post_forward(unit)))
                self._free(unit)
        self.optimizer = optimizer_class([u.shard for u in self.units], **optimizer_kwargs)

    # -- building ------------------------------------------------------------------------

    def _build_units(self) -> list[Unit]:
        units: list[Unit] = []
        seen: dict[int, int] = {}
        for module in self.module.modules():
            params = []
            for p in module.parameters(recurse=False):
                if not p.requires_grad:
                    continue
                if id(p) in seen:
                    if self.stage == 3:
                        raise ValueError("ZeRO stage 3 cannot shard a parameter shared between "
                                         "modules (tied weights); use stage 1 or 2")
                    continue
                seen[id(p)] = len(units)
                params.append(p)
            if params:
                units.append(self._make_unit(len(units), module, params))
        if not units:
            raise ValueError("the module has no trainable parameters to shard")
        return units

    def _make_unit(self, index: int, module: nn.Module, params: list[nn.Parameter]) -> Unit:
        offsets, numel = [], 0
        for p in params:
            offsets.append(numel)
            numel += p.numel()
        dtype = params[0].dtype
        if any(p.dtype != dtype for p in params):
            raise ValueError(f"module {type(module).__name__} mixes parameter dtypes")
        shard_numel = -(-numel // self.world)
        full = torch.zeros(shard_numel * self.world, dtype=dtype, device=device())
        with torch.no_grad():
            for p, off in zip(params, offsets, strict=True):
                full[off:off + p.numel()].copy_(p.detach().reshape(-1))
                p.data = full[off:off + p.numel()].view_as(p)
        lo = self.rank * shard_numel
        if self.stage == 0:  # plain data parallelism: every rank steps every element
            shard = nn.Parameter(full)
        elif self.stage >= 3:  # the shard lives on its own: ``full`` is freed between uses
            shard = nn.Parameter(full[lo:lo + shard_numel].clone())
        else:  # the shard is a view: stepping it updates this rank's slice of ``full``
            shard = nn.Parameter(full[lo:lo + shard_numel])
        unit = Unit(index, module, params, offsets, numel, shard_numel, full, shard)
        if self.stage <= 1:  # full gradients as views of one flat buffer (reduced in place)
            unit.grad_full = torch.zeros_like(full)
            for p, off in zip(params, offsets, strict=True):
                p.grad = unit.grad_full[off:off + p.numel()].view_as(p)
            unit.shard.grad = (unit.grad_full if self.stage == 0
                               else unit.grad_full[lo:lo + shard_numel])
        return unit

    def _broadcast_initial_state(self) -> None:
        if self.world == 1:
            return
        src = self.comm.ranks[0]
        pg = self.comm.pg
        for unit in self.units:
            dist.broadcast(unit.full, src, group=pg)
            if self.stage >= 3:
                lo = self.rank * unit.shard_numel
                unit.shard.data.copy_(unit.full[lo:lo + unit.shard_numel])
        for buf in self.module.buffers():
            dist.broadcast(buf, src, group=pg)

    # -- collectives on a unit -------------------------------------------------------------

    def _gather(self, unit: Unit) -> None:
        """All-gather ``unit``'s shards into its (re-allocated) full buffer."""
        storage = unit.full.untyped_storage()
        if storage.nbytes() == 0:
            storage.resize_(unit.padded * unit.full.element_size())
        with torch.no_grad(), span(self.tracer, "all_gather", f"all_gather unit {unit.index}",
                                   unit.full.nbytes):
            lo = self.rank * unit.shard_numel
            unit.full[lo:lo + unit.shard_numel].copy_(unit.shard.detach())
            if self.world > 1:
                ring_all_gather_chunks(self.comm, unit.full,
                                       chunk_bounds(unit.padded, self.world), mine=self.rank)

    def _free(self, unit: Unit) -> None:
        """Give back ``unit``'s full parameters (the views stay, their storage goes)."""
        unit.full.untyped_storage().resize_(0)

    def _reduce_grads(self, unit: Unit) -> None:
        """Average ``unit``'s gradients over the team: stage 0 ring-all-reduces them all, stages
        1–3 reduce-scatter them so each rank keeps its shard's (stages 2–3 then free the
        full gradients).

        Everything happens in buffers that live from step to step — stages 0–1 in the unit's
        flat gradient, stages 2–3 in one scratch buffer the size of the largest unit — because
        fresh memory costs a page fault per page (see :func:`backends.collectives.comm.scratch`).
        After a stage-1 reduce-scatter only this rank's slice of the flat gradient is meaningful
        (the rest holds partial sums).
        """
        if unit.reduced:
            return
        unit.reduced = True
        if unit.grad_full is not None:  # stages 0–1: gradients already sit in one flat buffer
            flat = unit.grad_full
        else:
            flat = self._scratch[:unit.padded]
            flat[unit.numel:].zero_()
            for p, off in zip(unit.params, unit.offsets, strict=True):
                view = flat[off:off + p.numel()]
                if p.grad is None:
                    view.zero_()
                else:
                    view.copy_(p.grad.reshape(-1))
                    p.grad = None
        with torch.no_grad(), span(self.tracer, "reduce_scatter",
                                   f"reduce grads unit {unit.index}", flat.nbytes):
            if self.stage == 0:
                if self.world > 1:
                    ring_all_reduce(flat, dist.ReduceOp.AVG, group=self.comm.ranks)
                return
            lo = self.rank * unit.shard_numel
            mine = flat[lo:lo + unit.shard_numel]
            if self.world > 1:  # in place: chunk ``rank`` of ``flat`` ends up summed
                ring_reduce_scatter_chunks(self.comm, flat,
                                           chunk_bounds(unit.padded, self.world),
                                           dist.ReduceOp.SUM)
                mine.div_(self.world)
            if unit.grad_full is not None:
                return  # stage 1: the shard's gradient is a view of ``grad_full``
            if unit.shard.grad is None:
                unit.shard.grad = mine.clone()
            else:
                unit.shard.grad.add_(mine)

    # -- hooks -----------------------------------------------------------------------------

    def _grad_ready(self, unit: Unit, i: int) -> Callable[[torch.Tensor], None]:
        def hook(_: torch.Tensor) -> None:
            unit.ready.add(i)
            if len(unit.ready) == len(unit.params):
                self._reduce_grads(unit)
                if self.stage == 3:
                    self._free(unit)
        return hook

    def _pre_forward(self, unit: Unit) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            self._gather(unit)
        return hook

    def _post_forward(self, unit: Unit) -> Callable[..., Any]:
        def hook(module: nn.Module, args: Any, output: Any) -> Any:
            self._free(unit)
            for out in _tensors(output):
                if out.requires_grad:
                    out.register_hook(self._pre_backward(unit))  # type: ignore[no-untyped-call]
                    break  # one output gradient is enough to know backward has reached us
            return output
        return hook

    def _pre_backward(self, unit: Unit) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            if unit.full.untyped_storage().nbytes() == 0:
                self._gather(unit)
        return hook

    # -- the user's API ----------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the module's forward (stage 3 gathers each unit's parameters around it)."""
        for unit in self.units:
            unit.ready.clear()
            unit.reduced = False
        return self.module(*to_device(args), **to_device(kwargs))

    def step(self) -> None:
        """Finish the gradient reduction, step the optimizer on this rank's shards, and share
        the updated shards (all-gather; stage 3 gathers lazily, at the next forward)."""
        for unit in self.units:  # units whose hooks never fired completely (unused params)
            self._reduce_grads(unit)
            if self.stage == 3:
                self._free(unit)
        self.optimizer.step()
        if self.stage in (1, 2):
            for unit in self.units:
                self._gather(unit)

    def zero_grad(self) -> None:
        """Zero the gradients in place (flat views at stages 0–1, shards at 2–3); drop the
        full gradients of stages 2–3."""
        for unit in self.units:
            if unit.grad_full is not None:
                unit.grad_full.zero_()
            else:  # the shard's gradient stays allocated (it is a model state of stage 2–3)
                if unit.shard.grad is not None:
                    unit.shard.grad.zero_()
                for p in unit.params:
                    p.grad = None
            unit.ready.clear()
            unit.reduced = False

    def full_parameters(self) -> dict[str, torch.Tensor]:
        """Every parameter, whole, by name (stage 3 gathers them): for checks and saving."""
        if self.stage == 3:
            for unit in self.units:
                self._gather(unit)
        out = {name: p.detach().clone() for name, p in self.module.named_parameters()}
        if self.stage == 3:
            for unit in self.units:
                self._free(unit)
        return out

    def model_states(self) -> dict[str, int]:
        """Bytes this rank holds now, by model state: the storage of parameters, gradients and
        optimizer state actually allocated (each storage counted once)."""
        seen: set[int] = set()

        def size(tensors: Iterator[torch.Tensor]) -> int:
            total = 0
            for t in tensors:
                storage = t.untyped_storage()
                if storage.data_ptr() in seen or storage.nbytes() == 0:
                    continue
                seen.add(storage.data_ptr())
                total += storage.nbytes()
            return total

        params = size(iter([u.full for u in self.units] + [u.shard for u in self.units]))
        grads = size(t for u in self.units for t in
                     ([u.grad_full] if u.grad_full is not None else
                      [p.grad for p in u.params if p.grad is not None]
                      + ([u.shard.grad] if u.shard.grad is not None else [])))
        optim = size(v for state in self.optimizer.state.values() for v in state.values()
                     if isinstance(v, torch.Tensor) and v.numel() > 1)
        return {"parameters": params, "gradients": grads, "optimizer": optim,
                "total": params + grads + optim}

    def held_bytes(self) -> int:
        """Bytes this rank keeps from step to step, counted from live storages: its model
        states (:meth:`model_states`) and the flat gradient buffer of stages 2–3 that each
        unit's gradients are reduce-scattered from (the twin of
        :func:`simulator.zero.held_bytes`)."""
        return self.model_states()["total"] + self._scratch.untyped_storage().nbytes()


def _tensors(output: Any) -> Iterator[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        yield output
    elif isinstance(output, (tuple, list)):
        for item in output:
            yield from _tensors(item)
    elif isinstance(output, dict):
        for item in output.values():
            yield from _tensors(item)
