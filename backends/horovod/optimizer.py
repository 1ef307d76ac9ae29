"""``DistributedOptimizer`` and the broadcasts that give every rank the same start.

Book chapter 7, "DistributedOptimizer"; Sergeev & Del Balso (2018). Re-implemented after
reading Horovod's ``horovod/torch/optimizer.py`` (``_DistributedOptimizer``: per-parameter
hooks, ``backward_passes_per_step``, ``synchronize``, ``skip_synchronize``, the ``zero_grad``
guard) and ``horovod/torch/functions.py`` (``broadcast_parameters``,
``broadcast_optimizer_state``, ``broadcast_object``); no code is taken from them.

``DistributedOptimizer(opt, named_parameters=model.named_parameters())`` returns an object of
a class made on the fly, a subclass of ``opt``'s class (so it *is* an ``SGD`` or an ``Adam``)
sharing ``opt``'s parameter groups and state. Each trainable parameter gets a
``register_post_accumulate_grad_hook``: when autograd has accumulated the parameter's gradient
for the ``backward_passes_per_step``-th time, the hook enqueues an in-place
``allreduce_async_`` of ``p.grad`` named after the parameter and returns at once, so the
all-reduces run on the background thread while backward goes on. ``step()`` first
``synchronize()``\\ s: it enqueues the parameters whose hook did not fire (an unused parameter
contributes zeros), waits on every handle, then calls the wrapped class's ``step``.

Differences from Horovod: no gradient compression, no Adasum, no sparse gradients;
``broadcast_optimizer_state`` sends root's state dict's structure as one pickled object and its
tensors one by one, so ranks whose optimizer has no state yet receive root's as it is (Horovod
first creates the state with a zero-gradient step).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

from backends.device import device
from backends.horovod import basics
from backends.horovod.ops import Average, allreduce_async_, broadcast_async_, broadcast_object
from backends.horovod.ops import synchronize as _wait


class _DistributedMixin:
    """The methods ``DistributedOptimizer`` adds to the wrapped optimizer's class."""

    param_groups: list[dict[str, Any]]

    def _hvd_setup(self, named_parameters: Iterable[tuple[str, torch.Tensor]] | None,
                   op: str, backward_passes_per_step: int) -> None:
        if backward_passes_per_step < 1:
            raise ValueError(f"backward_passes_per_step must be at least 1, got "
                             f"{backward_passes_per_step}")
        params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is None:
            names = {id(p): f"param.{i}" for i, p in enumerate(params)}
        else:
            named = list(named_parameters)
            seen = [n for n, _ in named]
            dupes = sorted({n for n in seen if seen.count(n) > 1})
            if dupes:
                raise ValueError(f"named_parameters has duplicate names: {dupes}")
            names = {id(p): n for n, p in named}
            unnamed = [i for i, p in enumerate(params) if id(p) not in names]
            if unnamed:
                raise ValueError(f"named_parameters does not name {len(unnamed)} of the "
                                 "optimizer's parameters; pass model.named_parameters()")
        self._hvd_names = names
        self._hvd_op = op
        self._hvd_bpps = backward_passes_per_step
        self._hvd_params = [p for p in params if p.requires_grad]
        self._hvd_delay = {id(p): backward_passes_per_step for p in self._hvd_params}
        self._hvd_handles: dict[int, tuple[torch.Tensor, int | None]] = {}
        self._hvd_synchronized = False
        self._hvd_should_synchronize = True
        self._hvd_hooks = [p.register_post_accumulate_grad_hook(self._hvd_make_hook(p))
                           for p in self._hvd_params]

    @property
    def backward_passes_per_step(self) -> int:
        """Local backward passes accumulated before each all-reduce."""
        return self._hvd_bpps

    def _hvd_make_hook(self, p: torch.Tensor) -> Callable[[torch.Tensor], None]:
        def hook(_: torch.Tensor) -> None:
            key = id(p)
            pending = self._hvd_handles.get(key)
            if pending is not None and pending[1] is not None:
                raise AssertionError(
                    "gradients were computed more than backward_passes_per_step times before "
                    "step(); increase backward_passes_per_step to accumulate more locally")
            self._hvd_delay[key] -= 1
            handle = self._hvd_allreduce(p) if self._hvd_delay[key] == 0 else None
            self._hvd_handles[key] = (p, handle)
        return hook

    def _hvd_allreduce(self, p: torch.Tensor) -> int:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        return allreduce_async_(p.grad, name=self._hvd_names[id(p)], op=self._hvd_op)

    def synchronize(self) -> None:
        """Start the all-reduces not started yet, wait for all, leave averages in ``.grad``."""
        for p in self._hvd_params:
            pending = self._hvd_handles.get(id(p))
            if pending is None or pending[1] is None:
                self._hvd_handles[id(p)] = (p, self._hvd_allreduce(p))
        try:
            for key, (_, handle) in self._hvd_handles.items():
                assert handle is not None
                _wait(handle)
                self._hvd_delay[key] = self._hvd_bpps
        finally:
            self._hvd_handles.clear()
        self._hvd_synchronized = True

    @contextmanager
    def skip_synchronize(self) -> Iterator[None]:
        """Inside, ``step()`` does not synchronize (call ``synchronize()`` yourself first)."""
        self._hvd_should_synchronize = False
        try:
            yield
        finally:
            self._hvd_should_synchronize = True

    def step(self, closure: Callable[[], float] | None = None) -> Any:
        """Synchronize the gradients (unless skipped), then the wrapped optimizer's step."""
        if self._hvd_should_synchronize:
            if self._hvd_synchronized:
                warnings.warn("optimizer.step() called after optimizer.synchronize() without "
                              "skip_synchronize(): the gradients are reduced a second time",
                              stacklevel=2)
            self.synchronize()
        self._hvd_synchronized = False
        return super().step(closure)  # type: ignore[misc]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The wrapped ``zero_grad``; refused while all-reduces are pending."""
        if self._hvd_handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before "
                "optimizer.step() or optimizer.synchronize(); with backward_passes_per_step > "
                "1, call zero_grad only after step()")
        super().zero_grad(set_to_none)  # type: ignore[misc]


def DistributedOptimizer(optimizer: torch.optim.Optimizer,
                         named_parameters: Iterable[tuple[str, torch.Tensor]] | None = None,
                         backward_passes_per_step: int = 1,
                         op: str = Average) -> torch.optim.Optimizer:
    """Wrap ``optimizer`` so that ``step()`` applies gradients averaged over all ranks.

    Args:
        optimizer: the local optimizer (its parameter groups and state are shared).
        named_parameters: ``model.named_parameters()``; the names match the all-reduces across
            ranks (without it, parameters are numbered in optimizer order).
        backward_passes_per_step: local backward passes accumulated into ``.grad`` before one
            all-reduce.
        op: ``hvd.Average`` (default) or ``hvd.Sum``.

    Returns:
        An instance of a subclass of ``type(optimizer)``.
    """
    basics.engine()  # raises if not initialised
    base = type(optimizer)
    cls: Any = type(base.__name__, (_DistributedMixin, base), {})
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    wrapped._hvd_setup(named_parameters, str(op), backward_passes_per_step)
    result: torch.optim.Optimizer = wrapped
    return result


def broadcast_parameters(params: Mapping[str, torch.Tensor] | Iterable[tuple[str, Any]],
                         root_rank: int) -> None:
    """Overwrite every rank's parameters (or state dict entries) with root's, in place.

    Args:
        params: ``model.state_dict()`` or ``model.named_parameters()``.
        root_rank: the rank whose values win.
    """
    items = sorted(params.items()) if isinstance(params, Mapping) else list(params)
    handles = [broadcast_async_(p, root_rank, name) for name, p in items
               if isinstance(p, torch.Tensor)]
    for h in handles:
        _wait(h)


def _strip(obj: Any, tensors: list[torch.Tensor]) -> Any:
    """``obj`` with each tensor replaced by a placeholder; the tensors appended in order."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return ("__hvd_tensor__", tuple(obj.shape), str(obj.dtype).removeprefix("torch."))
    if isinstance(obj, dict):
        return {k: _strip(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_strip(v, tensors) for v in obj)
    return obj


def _fill(obj: Any, make: Callable[[tuple[int, ...], str], torch.Tensor]) -> Any:
    if isinstance(obj, tuple) and len(obj) == 3 and obj[0] == "__hvd_tensor__":
        return make(obj[1], obj[2])
    if isinstance(obj, dict):
        return {k: _fill(v, make) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_fill(v, make) for v in obj)
    return obj


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int) -> None:
    """Make every rank's optimizer state and hyperparameters equal to root's."""
    mine: list[torch.Tensor] = []
    skeleton = _strip(optimizer.state_dict(), mine)
    skeleton = broadcast_object(skeleton if basics.rank() == root_rank else None, root_rank,
                                name="optimizer.state_dict")
    if basics.rank() == root_rank:
        tensors = mine
    else:
        tensors = []

        def make(shape: tuple[int, ...], dtype: str) -> torch.Tensor:
            t = torch.zeros(shape, dtype=getattr(torch, dtype), device=device())
            tensors.append(t)
            return t

        skeleton = _fill(skeleton, make)
    handles = [broadcast_async_(t, root_rank, f"optimizer.state.{i}")
               for i, t in enumerate(tensors)]
    for h in handles:
        _wait(h)
    if basics.rank() != root_rank:
        optimizer.load_state_dict(skeleton)
