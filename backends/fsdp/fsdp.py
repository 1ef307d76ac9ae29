"""Fully Sharded Data Parallel from scratch on ``torch.distributed`` (chapter 20).

Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel", VLDB 2023,
§3 — ZeRO stage 3 (Rajbhandari et al., SC 2020, §5.3) organised around **units**
(:mod:`backends.fsdp.unit`). Each unit's forward and backward are wrapped in hooks:

* **pre-forward** — unshard the unit (all-gather, :func:`~backends.fsdp.unit.unshard`) and
  wait; with ``prefetch`` issue the *next* unit's all-gather now, before this unit computes,
  so the two overlap (FSDP §3.3.2, "forward prefetching"); cast the inputs to
  ``param_dtype``;
* **post-forward** — with ``reshard_after_forward`` free the unit again (ZeRO-3's memory: one
  or two units gathered at a time, and a second all-gather before backward); without, keep it
  gathered until its backward (ZeRO-2's traffic, ``2Ψ``, more memory) — FSDP §3.2.2;
  register the pre-backward hook on the output;
* **pre-backward** (the output's gradient hook) — unshard the unit if it was freed and wait;
  with ``prefetch`` issue the all-gather of the unit whose backward comes next, the one
  before it (FSDP §3.3.2, "backward prefetching");
* **post-backward** (once every parameter of the unit has its gradient) — reduce-scatter the
  gradients (:func:`~backends.fsdp.unit.reduce_scatter_grads`) and free the unit.

The order of prefetching is the units' order (the modules' registration order, which is the
forward order of a ``Sequential``). Every all-gather issued is logged in :attr:`FSDP.log`
as ``("gather", i)``, each unit's compute as it starts as ``("forward", i)`` or
``("backward", i)``, so the prefetch order can be read back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends.collectives.comm import Comm
from backends.device import on_device, to_device
from backends.fsdp.unit import (
    FlatUnit,
    MixedPrecision,
    flatten,
    reduce_scatter_grads,
    reshard,
    unshard,
    wait_unsharded,
)


class FSDP:
    """Data-parallel training of ``module`` with every unit's parameters sharded.

    Use like a module plus its optimizer::

        fsdp = FSDP(model, torch.optim.Adam, lr=1e-3)
        loss_fn(fsdp(x), y).backward()
        fsdp.step()
        fsdp.zero_grad()

    Args:
        module: the model (moved to the rank's device); parameters start as rank 0's.
        optimizer_class: any ``torch.optim`` class; it steps the fp32 shards only, so its
            state is sharded too. ``optimizer_kwargs`` go to it.
        units: the modules wrapped as units, in forward order (default: every submodule that
            owns trainable parameters directly); parameters outside them form one more unit,
            the root, gathered for the whole forward and backward.
        reshard_after_forward: free each unit after its forward (and gather it again for
            backward).
        prefetch: issue the next unit's all-gather before the current unit computes.
        mixed_precision: dtypes of compute and reduction (:class:`MixedPrecision`).
        group: the data-parallel process group (default: the world).
    """

    def __init__(self, module: nn.Module, optimizer_class: type[torch.optim.Optimizer],
                 units: list[nn.Module] | None = None, reshard_after_forward: bool = True,
                 prefetch: bool = True, mixed_precision: MixedPrecision | None = None,
                 group: Any = None, **optimizer_kwargs: Any) -> None:
        self.module, self.comm = on_device(module), Comm(group)
        self.world, self.rank = self.comm.world_size, self.comm.rank
        self.reshard_after_forward, self.prefetch = reshard_after_forward, prefetch
        self.mp = mixed_precision or MixedPrecision()
        for t in list(self.module.parameters()) + list(self.module.buffers()):
            if self.world > 1:
                dist.broadcast(t.data, self.comm.ranks[0], group=self.comm.pg)
        self.units = self._build_units(units)
        self.log: list[tuple[str, int]] = []
        for unit in self.units:
            reshard(unit)
            unit.module.register_forward_pre_hook(self._pre_forward(unit))
            unit.module.register_forward_hook(self._post_forward(unit))
            for i, p in enumerate(unit.params):
                p.register_post_accumulate_grad_hook(  # type: ignore[no-untyped-call]
                    self._post_backward(unit, i))
        reduce_dtype = self.mp.reduce_dtype or self.units[0].shard.dtype
        self._scratch = torch.empty(max(u.padded for u in self.units), dtype=reduce_dtype,
                                    device=self.units[0].shard.device)
        self.optimizer = optimizer_class([u.shard for u in self.units], **optimizer_kwargs)

    def _build_units(self, modules: list[nn.Module] | None) -> list[FlatUnit]:
        if modules is None:
            modules = [m for m in self.module.modules()
                       if any(p.requires_grad for p in m.parameters(recurse=False))]
        owned: dict[int, nn.Module] = {}
        for m in modules:
            for p in m.parameters():
                if p.requires_grad:
                    owned.setdefault(id(p), m)
        groups: list[tuple[nn.Module, list[nn.Parameter]]] = [
            (m, [p for p in m.parameters() if owned.get(id(p)) is m]) for m in modules]
        rest = [p for p in self.module.parameters() if p.requires_grad and id(p) not in owned]
        if rest:  # the root unit
            groups.insert(0, (self.module, rest))
        return [flatten(i, m, ps, self.world, self.rank, self.mp.param_dtype)
                for i, (m, ps) in enumerate(g for g in groups if g[1])]

    # -- hooks ---------------------------------------------------------------------------

    def _gather(self, unit: FlatUnit) -> None:
        if not unit.unsharded:
            self.log.append(("gather", unit.index))
            unshard(unit, self.comm)

    def _neighbour(self, unit: FlatUnit, step: int) -> FlatUnit | None:
        j = unit.index + step
        return self.units[j] if 0 <= j < len(self.units) else None

    def _pre_forward(self, unit: FlatUnit) -> Callable[..., Any]:
        def hook(module: nn.Module, args: Any) -> Any:
            self._gather(unit)
            wait_unsharded(unit)
            following = self._neighbour(unit, 1)
            if self.prefetch and following is not None:
                self._gather(following)
            self.log.append(("forward", unit.index))
            if self.mp.param_dtype is not None:
                return _cast(args, self.mp.param_dtype)
            return None
        return hook

    def _post_forward(self, unit: FlatUnit) -> Callable[..., Any]:
        def hook(module: nn.Module, args: Any, output: Any) -> Any:
            if self.reshard_after_forward:
                reshard(unit)
            for out in _tensors(output):
                if out.requires_grad:
                    out.register_hook(self._pre_backward(unit))  # type: ignore[no-untyped-call]
                    break  # one output gradient is enough to know backward has reached us
            return output
        return hook

    def _pre_backward(self, unit: FlatUnit) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            self._gather(unit)
            wait_unsharded(unit)
            previous = self._neighbour(unit, -1)
            if self.prefetch and previous is not None:
                self._gather(previous)
            self.log.append(("backward", unit.index))
        return hook

    def _post_backward(self, unit: FlatUnit, i: int) -> Callable[[torch.Tensor], None]:
        def hook(_: torch.Tensor) -> None:
            unit.ready.add(i)
            if len(unit.ready) == len(unit.params):
                self._reduce(unit)
        return hook

    def _reduce(self, unit: FlatUnit) -> None:
        if not unit.reduced:
            unit.reduced = True
            reduce_scatter_grads(unit, self.comm, self.mp.reduce_dtype, self._scratch)
            wait_unsharded(unit)
            reshard(unit)

    # -- the user's API --------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The module's forward, each unit gathered around its compute."""
        self.begin_step()
        return self.module(*to_device(args), **to_device(kwargs))

    def begin_step(self) -> None:
        """Forget the last step's per-unit state (gradients ready, reduced) before a forward."""
        for unit in self.units:
            unit.ready.clear()
            unit.reduced = False

    def step(self) -> None:
        """Reduce the gradients of units whose hooks did not all fire (unused parameters),
        then step the optimizer on this rank's shards."""
        for unit in self.units:
            self._reduce(unit)
        self.optimizer.step()

    def zero_grad(self) -> None:
        """Zero the shards' gradients in place (kept allocated: a model state)."""
        for unit in self.units:
            if unit.shard.grad is not None:
                unit.shard.grad.zero_()
            for p in unit.params:
                p.grad = None
            unit.ready.clear()
            unit.reduced = False

    def full_parameters(self) -> dict[str, torch.Tensor]:
        """Every parameter, whole, fp32, by name (gathered in the shards' dtype)."""
        out: dict[str, torch.Tensor] = {}
        for unit in self.units:
            flat = torch.empty(unit.padded, dtype=unit.shard.dtype, device=unit.shard.device)
            dist.all_gather_single(flat, unit.shard.detach(), group=self.comm.pg)
            for p, off in zip(unit.params, unit.offsets, strict=True):
                out[_name(self.module, p)] = flat[off:off + p.numel()].view(p.shape).clone()
        return out

    def model_states(self) -> int:
        """Bytes of the model states this rank holds now, from live storages: its shards,
        their gradients and the optimizer state (each storage once)."""
        return _storage_bytes([u.shard for u in self.units]
                              + [u.shard.grad for u in self.units if u.shard.grad is not None]
                              + [v for s in self.optimizer.state.values() for v in s.values()
                                 if isinstance(v, torch.Tensor) and v.numel() > 1])

    def held_bytes(self) -> int:
        """Bytes this rank keeps from step to step, from live storages: the model states
        (:meth:`model_states`), the flat gradient buffer and any unit still gathered — the
        twin of :func:`simulator.fsdp.held_bytes`."""
        return self.model_states() + _storage_bytes([u.full for u in self.units]
                                                    + [self._scratch])


def _storage_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of the storages behind ``tensors``, each counted once."""
    seen: set[int] = set()
    total = 0
    for t in tensors:
        storage = t.untyped_storage()
        if storage.nbytes() and storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


def _name(module: nn.Module, param: torch.Tensor) -> str:
    return next(n for n, p in module.named_parameters() if p is param)


def _cast(args: Any, dtype: torch.dtype) -> Any:
    if isinstance(args, torch.Tensor):
        return args.to(dtype) if args.is_floating_point() else args
    if isinstance(args, tuple):
        return tuple(_cast(a, dtype) for a in args)
    return args


def _tensors(output: Any) -> Iterator[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        yield output
    elif isinstance(output, (tuple, list)):
        for item in output:
            yield from _tensors(item)
    elif isinstance(output, dict):
        for item in output.values():
            yield from _tensors(item)
