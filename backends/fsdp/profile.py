"""What each FSDP unit costs on ONE process, through our wrapper (chapter 20).

A unit's step is more than its module's compute: :class:`~backends.fsdp.FSDP`'s hooks
re-allocate the flat buffer and view the parameters out of it, free it again, log the
gathers, copy the fresh gradients into the flat gradient buffer, average them into the
shard's gradient — work on the CPU that a profile of the plain modules never sees, and that
for small units is a sizable share of their matrix products' time. Like the MoE twin's
profile of the expert-parallel layer at world 1 (:func:`backends.moe.measure.profile_costs`),
the rank program :func:`unit_costs` runs the wrapper itself in a team of one process, where
the all-gather posts no message and the reduce-scatter's ring has no step, so what is left
in each unit's seconds is its compute plus the wrapper's bookkeeping. It never looks at a step
of two or more ranks: a one-process profile, a primitive.

Each unit's forward and backward are timed by :func:`backends.pipeline.profiler.profile_layers`
— whole training iterations of the wrapped model, a hook on each layer boundary — with the
wrapper's hooks firing inside the spans they belong to: a unit's pre-forward hook (its
gather and the prefetch of the next) and post-forward hook before its output exists; its
pre-backward hook (the hook on its output's gradient, registered before the profiler's) and
its post-backward reduce-scatter (run when its parameters' gradients are accumulated, before
the layer below starts its backward) inside its backward. A parameter-free layer (an
activation) is charged to the unit before it, as :func:`lab.zero.profile_units` charges it.

Two pieces of local work shrink with the world and are timed apart, so that a prediction at
``N`` ranks keeps only their ``1/N`` (the simulator prices the rest as messages):

* ``gather_copy_s`` — a gather's copy of this rank's shard into the flat buffer (cast to the
  compute dtype first): the whole unit at world 1, a ``1/N`` shard at ``N``;
* ``reduce_local_s`` — the reduce-scatter's local arithmetic on this rank's chunk (÷ ``N``,
  added into the shard's gradient): the whole unit at world 1, ``1/N`` of it at ``N``.

``forward_gathers``/``backward_gathers`` name the units whose gathers fall in a unit's span
(read from :attr:`FSDP.log`: with prefetching, unit ``i``'s forward issues unit ``i+1``'s).
Seconds on one core (the spawned process runs one intra-op thread); bytes.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from backends.device import device
from backends.fsdp.fsdp import FSDP
from backends.fsdp.measure import BF16
from backends.fsdp.unit import FlatUnit, reshard, unshard, wait_unsharded
from backends.measure import median_time
from backends.pipeline.profiler import profile_layers


def _spans(log: list[tuple[str, int]]) -> dict[tuple[str, int], list[int]]:
    """The units gathered in each compute span of one step's log: the gathers logged before a
    ``("forward", i)`` or ``("backward", i)`` entry and after the previous one."""
    spans: dict[tuple[str, int], list[int]] = {}
    gathered: list[int] = []
    for kind, i in log:
        if kind == "gather":
            gathered.append(i)
        else:
            spans[(kind, i)] = gathered
            gathered = []
    return spans


def _gather_copy_s(fsdp: FSDP, unit: FlatUnit, repeats: int) -> float:
    """The local copy of a gather at world 1 (the shard cast and copied into the whole flat
    buffer), s — timed with the buffer allocated, as :func:`backends.fsdp.unit.unshard` does
    it."""
    unshard(unit, fsdp.comm)
    wait_unsharded(unit)
    k = unit.shard_numel

    def copy_in() -> None:
        with torch.no_grad():
            unit.full[:k].copy_(unit.shard.detach().to(unit.full.dtype))

    try:
        return median_time(copy_in, repeats)
    finally:
        reshard(unit)


def _reduce_local_s(unit: FlatUnit, repeats: int) -> float:
    """The reduce-scatter's local arithmetic on the whole unit at world 1 (its chunk divided
    by the team's size, added into the shard's gradient), s — as
    :func:`backends.fsdp.unit.reduce_scatter_grads` does it."""
    mine, grad = torch.ones_like(unit.shard.detach()), torch.zeros_like(unit.shard.detach())

    def local() -> None:
        mine.div_(1)
        grad.add_(mine)

    return median_time(local, repeats)


def _step_log(fsdp: FSDP, example: torch.Tensor) -> list[tuple[str, int]]:
    """One training iteration's :attr:`FSDP.log` (forward, then backward from the sum), from
    every unit resharded, as a step starts (the profiler's forwards without gradients leave
    units gathered when they are not resharded after forward)."""
    for unit in fsdp.units:
        reshard(unit)
    fsdp.log.clear()
    fsdp(example).sum().backward()
    fsdp.zero_grad()
    return list(fsdp.log)


def _owner(fsdp: FSDP, layers: list[nn.Module]) -> list[int]:
    """For each layer of the sequential model, the unit it is charged to: its own, or the
    unit before it for a parameter-free layer."""
    index = {id(u.module): u.index for u in fsdp.units}
    owners, current = [], 0
    for layer in layers:
        current = index.get(id(layer), current)
        owners.append(current)
    return owners


def unit_costs(model: nn.Sequential, features: int, batch: int, reshard_after_forward: bool,
               prefetch: bool, mixed: bool, repeats: int = 10) -> list[dict[str, Any]]:
    """Rank program for a team of ONE process: each unit of :class:`FSDP` over ``model``
    (every layer with parameters a unit, as the real step cuts it) on ``batch`` rows of
    ``features`` inputs — ``numel``, ``forward_s``/``backward_s`` (medians over ``repeats``
    iterations, the wrapper's hooks included), ``gather_copy_s``, ``reduce_local_s`` and the
    units gathered in its ``forward_gathers``/``backward_gathers`` (see the module docstring).
    Each iteration starts as :meth:`FSDP.__call__` starts a step (a hook before the first
    layer's), so every unit's post-backward reduce-scatter runs in every iteration."""
    fsdp = FSDP(copy.deepcopy(model), torch.optim.Adam, reshard_after_forward=reshard_after_forward,
                prefetch=prefetch, mixed_precision=BF16 if mixed else None, lr=1e-3)
    if fsdp.world != 1:
        raise ValueError(f"unit_costs profiles a team of one process, not {fsdp.world}")
    wrapped = fsdp.module
    if not isinstance(wrapped, nn.Sequential):
        raise ValueError("unit_costs profiles an nn.Sequential")
    layers = list(wrapped.children())
    if not {id(u.module) for u in fsdp.units} <= {id(m) for m in layers}:
        raise ValueError("unit_costs expects every unit to be a layer of the sequential model")

    def new_step(*_: Any) -> None:  # what FSDP.__call__ does before each step's forward
        fsdp.log.clear()
        fsdp.begin_step()

    handle = layers[0].register_forward_pre_hook(new_step, prepend=True)
    example = torch.randn(batch, features, generator=torch.Generator().manual_seed(0))
    try:
        profile = profile_layers(wrapped, example.to(device()), repeats=repeats)
    finally:
        handle.remove()
    spans = _spans(_step_log(fsdp, example))
    owners = _owner(fsdp, layers)
    out = []
    for unit in fsdp.units:
        mine = [layer for layer, o in zip(profile, owners, strict=True) if o == unit.index]
        out.append({"numel": unit.numel,
                    "forward_s": sum(layer.forward_s for layer in mine),
                    "backward_s": sum(layer.backward_s for layer in mine),
                    "gather_copy_s": _gather_copy_s(fsdp, unit, repeats),
                    "reduce_local_s": _reduce_local_s(unit, repeats),
                    "forward_gathers": spans.get(("forward", unit.index), []),
                    "backward_gathers": spans.get(("backward", unit.index), [])})
    return out
