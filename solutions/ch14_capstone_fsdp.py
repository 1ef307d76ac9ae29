"""Chapter 14 capstone: ZeRO stage 3 / FSDP, unit by unit, with prefetching — reference answer.

ZeRO stage 3 (Rajbhandari et al., SC 2020, §5.3) and PyTorch's Fully Sharded Data Parallel
(Zhao et al., "PyTorch FSDP", VLDB 2023, §3–4) keep only ``1/N`` of every model state on each
of ``N`` data-parallel ranks — the parameters too. The model is cut into **units** (here each
``nn.Linear``): a unit's parameters live in one flat buffer padded to ``N·k`` elements, and rank
``r`` owns elements ``[r·k, (r+1)·k)`` — its **shard**. Around each unit's compute:

* **forward** — all-gather the unit's full parameters, run it, free them again
  (*reshard after forward*);
* **backward** — all-gather them again, let autograd compute the gradients, **reduce-scatter**
  the unit's flat gradient so rank ``r`` keeps the average of its shard's, free everything;
* **step** — the optimizer sees the shards only, so its state is sharded too.

Per step each unit is all-gathered twice and reduce-scattered once: ``3·(N−1)/N`` times the
unit's bytes sent per rank (:func:`simulator.zero.communication_bytes`, stage 3). The gathers
sit on the critical path unless they are **prefetched**: while unit ``i`` computes, the
all-gather of the next unit (``i+1`` in forward, ``i−1`` in backward) is already in flight
(issued now, waited for later), at the price of one more gathered unit held at a time (FSDP §4.3,
"forward/backward prefetching").

The plumbing — units, the flat/pad helpers, the hooks that call the seven methods of
:class:`FSDP` the exercise is about, the event log and the optimizer — is the same in the stub.
Run the grader: ``DISTML_IMPL=solutions pytest tests/exercises/test_ch14_capstone_fsdp.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

Event = tuple[str, int]
"""An entry of the event log: what happened (``"forward start"``, …) and to which unit."""


def padded_numel(numel: int, world: int) -> int:
    """``numel`` rounded up to a multiple of ``world``: ``world·⌈numel/world⌉`` elements, so the
    flat buffer splits into ``world`` equal shards."""
    return -(-numel // world) * world


@dataclass
class FlatUnit:
    """One unit's parameters, flattened. ``full`` has ``padded`` elements (zeros after
    ``numel``); the unit's parameters are views of it. Its storage is freed between uses
    (:func:`free_storage`) — the views stay valid objects, the memory goes. ``shard`` is this
    rank's slice ``[rank·shard_numel, (rank+1)·shard_numel)`` in memory of its own, the only
    copy kept between uses; the optimizer steps it."""

    index: int
    module: nn.Module
    params: list[nn.Parameter]
    offsets: list[int]
    numel: int
    shard_numel: int
    full: torch.Tensor
    shard: nn.Parameter
    work: Any = None
    """The all-gather in flight into ``full`` (``None`` when none is)."""
    ready: int = 0
    """Parameters whose gradient autograd has accumulated in this backward."""

    @property
    def padded(self) -> int:
        """Elements of the padded flat buffer, ``world·shard_numel``."""
        return self.full.numel()


def flatten_unit(index: int, module: nn.Module, world: int, rank: int) -> FlatUnit:
    """Move ``module``'s own parameters into one padded flat buffer (the parameters become
    views of it) and copy out this rank's shard."""
    params = [p for p in module.parameters(recurse=False) if p.requires_grad]
    offsets, numel = [], 0
    for p in params:
        offsets.append(numel)
        numel += p.numel()
    full = torch.zeros(padded_numel(numel, world), dtype=params[0].dtype)
    with torch.no_grad():
        for p, off in zip(params, offsets, strict=True):
            full[off:off + p.numel()].copy_(p.detach().reshape(-1))
            p.data = full[off:off + p.numel()].view_as(p)
    k = full.numel() // world
    shard = nn.Parameter(full[rank * k:(rank + 1) * k].clone())
    return FlatUnit(index, module, params, offsets, numel, k, full, shard)


def is_allocated(unit: FlatUnit) -> bool:
    """Whether ``unit.full`` has memory now (gathered, or being gathered)."""
    return unit.full.untyped_storage().nbytes() > 0


def allocate_storage(unit: FlatUnit) -> None:
    """Give ``unit.full`` its memory back (contents undefined until gathered)."""
    unit.full.untyped_storage().resize_(unit.full.numel() * unit.full.element_size())


def free_storage(unit: FlatUnit) -> None:
    """Free ``unit.full``'s memory; the parameter views keep their shapes, not their data."""
    unit.full.untyped_storage().resize_(0)


class Collectives:
    """The two collectives a unit needs, among the ranks of the default process group, logged.

    Both are *direct exchanges* of point-to-point messages: every rank sends each peer the
    peer's slice, ``(N−1)/N`` of the unit's buffer per rank — the volume of a ring, with no
    staging buffer the size of the unit (gloo's own all-gather allocates one, at moments that
    depend on its threads, which would blur the memory a step measurably holds). Each call is
    logged (``log(event, unit)``) and appended to ``records`` (kind, unit, bytes of the full
    flat buffer) — what the grader counts; use these, not ``torch.distributed`` directly."""

    def __init__(self, log: Callable[[str, int], None]) -> None:
        self.log = log
        self.records: list[tuple[str, int, int]] = []
        self.world, self.rank = dist.get_world_size(), dist.get_rank()

    def all_gather(self, output: torch.Tensor, shard: torch.Tensor, unit: int) -> AllGather:
        """Start gathering every rank's ``shard`` (``k`` elements) into ``output`` (``N·k``),
        rank ``r``'s at ``[r·k, (r+1)·k)``. Returns at once; ``wait()`` on the result blocks
        until ``output`` is complete."""
        self.log("issue all_gather", unit)
        self.records.append(("all_gather", unit, output.nbytes))
        k = shard.numel()
        peers = [p for p in range(self.world) if p != self.rank]
        works: list[Any] = [dist.irecv(output[p * k:(p + 1) * k], p, tag=2 * unit) for p in peers]
        works += [dist.isend(shard, p, tag=2 * unit) for p in peers]
        output[self.rank * k:(self.rank + 1) * k].copy_(shard)
        return AllGather(works, self.log, unit)

    def reduce_scatter(self, output: torch.Tensor, flat: torch.Tensor, unit: int) -> None:
        """Sum ``flat`` (``N·k`` elements) over the ranks and leave slice ``r`` of the sum in
        rank ``r``'s ``output`` (``k``); blocks until done."""
        self.log("reduce_scatter", unit)
        self.records.append(("reduce_scatter", unit, flat.nbytes))
        k = output.numel()
        peers = [p for p in range(self.world) if p != self.rank]
        sends: list[Any] = [dist.isend(flat[p * k:(p + 1) * k], p, tag=2 * unit + 1) for p in peers]
        output.copy_(flat[self.rank * k:(self.rank + 1) * k])
        incoming = torch.empty_like(output)
        for p in peers:
            dist.recv(incoming, p, tag=2 * unit + 1)
            output.add_(incoming)
        for work in sends:
            work.wait()


class AllGather:
    """An all-gather in flight (:meth:`Collectives.all_gather`)."""

    def __init__(self, works: list[Any], log: Callable[[str, int], None], unit: int) -> None:
        self.works, self.log, self.unit = works, log, unit

    def wait(self) -> None:
        """Block until every shard has arrived (and ours has left)."""
        for work in self.works:
            work.wait()
        self.log("wait all_gather", self.unit)


class FSDP:
    """Fully sharded data parallelism over the default process group, with prefetching.

    Use like a module plus its optimizer::

        fsdp = FSDP(model, torch.optim.Adam, lr=1e-3)
        loss_fn(fsdp(x), y).backward()
        fsdp.step()
        fsdp.zero_grad()

    Every submodule that owns parameters is a unit; ``module`` must run its units in the
    order ``module.modules()`` lists them, each once per forward (an ``nn.Sequential``).
    Parameters start as rank 0's. ``prefetch=False`` gathers each unit only when it is needed.

    Attributes:
        units: the :class:`FlatUnit` of each unit, in forward order.
        events: the event log, in order: the hooks append ``forward start``/``forward end``
            and ``backward start``/``backward end`` of each unit, :attr:`comm` its
            collectives.
        gathered: for each event, the units whose full parameters were allocated just after
            it — the memory that prefetching costs.
        comm: the logged collectives (:class:`Collectives`).
        optimizer: ``optimizer_class`` over the shards only.
    """

    def __init__(self, module: nn.Module, optimizer_class: type[torch.optim.Optimizer],
                 prefetch: bool = True, **optimizer_kwargs: Any) -> None:
        self.module, self.prefetch = module, prefetch
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.events: list[Event] = []
        self.gathered: list[tuple[int, ...]] = []
        self.comm = Collectives(self.log)
        owners = [m for m in module.modules()
                  if any(p.requires_grad for p in m.parameters(recurse=False))]
        self.units = [flatten_unit(i, m, self.world, self.rank) for i, m in enumerate(owners)]
        # one flat gradient buffer, the size of the largest unit, reused by every unit
        self.grad_buffer = torch.zeros(max(u.padded for u in self.units))
        for unit in self.units:
            dist.broadcast(unit.full, 0)
            unit.shard.data.copy_(unit.full[self.rank * unit.shard_numel:
                                            (self.rank + 1) * unit.shard_numel])
            free_storage(unit)
            unit.shard.grad = torch.zeros_like(unit.shard)
            unit.module.register_forward_pre_hook(self._forward_start(unit.index))
            unit.module.register_forward_hook(self._forward_end(unit.index))
            for p in unit.params:
                p.register_post_accumulate_grad_hook(  # type: ignore[no-untyped-call]
                    self._grad_accumulated(unit.index))
        self.optimizer = optimizer_class([u.shard for u in self.units], **optimizer_kwargs)

    # -- the hooks: plumbing that calls the seven methods below, logging as it goes --------

    def log(self, event: str, unit: int) -> None:
        """Append ``(event, unit)`` to :attr:`events` and the units gathered now to
        :attr:`gathered`."""
        self.events.append((event, unit))
        self.gathered.append(tuple(u.index for u in self.units if is_allocated(u)))

    def _forward_start(self, i: int) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            self.pre_forward(i)
            self.log("forward start", i)
        return hook

    def _forward_end(self, i: int) -> Callable[..., Any]:
        def hook(module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
            self.log("forward end", i)
            self.post_forward(i)
            if output.requires_grad:  # its gradient arrives just before the unit's backward
                output.register_hook(self._backward_start(i))  # type: ignore[no-untyped-call]
            return output
        return hook

    def _backward_start(self, i: int) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            self.pre_backward(i)
            self.log("backward start", i)
        return hook

    def _grad_accumulated(self, i: int) -> Callable[[torch.Tensor], None]:
        def hook(param: torch.Tensor) -> None:
            unit = self.units[i]
            unit.ready += 1
            if unit.ready == len(unit.params):
                unit.ready = 0
                self.log("backward end", i)
                self.post_backward(i)
        return hook

    def flat_gradient(self, i: int) -> torch.Tensor:
        """Unit ``i``'s parameter gradients packed into the first ``padded`` elements of
        :attr:`grad_buffer` (zeros in the padding); the parameters' own ``.grad`` are
        dropped."""
        unit = self.units[i]
        flat = self.grad_buffer[:unit.padded]
        flat[unit.numel:].zero_()
        for p, off in zip(unit.params, unit.offsets, strict=True):
            view = flat[off:off + p.numel()]
            if p.grad is None:
                view.zero_()
            else:
                view.copy_(p.grad.reshape(-1))
                p.grad = None
        return flat

    # -- the exercise ------------------------------------------------------------------------

    def unshard(self, i: int) -> None:
        """Start gathering unit ``i``'s full parameters unless they are there or on the way."""
        unit = self.units[i]
        if is_allocated(unit):
            return
        allocate_storage(unit)
        unit.work = self.comm.all_gather(unit.full, unit.shard.detach(), i)

    def wait_unsharded(self, i: int) -> None:
        """Return once unit ``i``'s full parameters are in ``full``."""
        self.unshard(i)
        unit = self.units[i]
        if unit.work is not None:
            unit.work.wait()
            unit.work = None

    def reshard(self, i: int) -> None:
        """Free unit ``i``'s full parameters (only its shard stays)."""
        free_storage(self.units[i])

    def pre_forward(self, i: int) -> None:
        """Before unit ``i``'s forward: its parameters gathered, the next unit's on the way."""
        self.wait_unsharded(i)
        if self.prefetch and i + 1 < len(self.units):
            self.unshard(i + 1)

    def post_forward(self, i: int) -> None:
        """After unit ``i``'s forward."""
        self.reshard(i)

    def pre_backward(self, i: int) -> None:
        """Before unit ``i``'s backward: gathered again, the previous unit's on the way."""
        self.wait_unsharded(i)
        if self.prefetch and i > 0:
            self.unshard(i - 1)

    def post_backward(self, i: int) -> None:
        """Once every gradient of unit ``i`` is accumulated: its shard's average gradient
        into ``shard.grad``, the full parameters and gradients freed."""
        unit = self.units[i]
        flat = self.flat_gradient(i)
        mine = torch.empty_like(unit.shard)
        self.comm.reduce_scatter(mine, flat, i)
        unit.shard.grad.add_(mine, alpha=1.0 / self.world)  # type: ignore[union-attr]
        self.reshard(i)

    # -- the user's API (given) ----------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the module's forward (the hooks gather and free each unit around it)."""
        return self.module(*args, **kwargs)

    def step(self) -> None:
        """Step the optimizer on this rank's shards."""
        self.optimizer.step()

    def zero_grad(self) -> None:
        """Zero the shards' gradients in place (they stay allocated between steps)."""
        for unit in self.units:
            unit.shard.grad.zero_()  # type: ignore[union-attr]

    def full_parameters(self) -> dict[str, torch.Tensor]:
        """Every parameter whole, by name (each unit gathered and freed again; logged like
        any gather): for checks."""
        for unit in self.units:
            allocate_storage(unit)
            self.comm.all_gather(unit.full, unit.shard.detach(), unit.index).wait()
        out = {name: p.detach().clone() for name, p in self.module.named_parameters()}
        for unit in self.units:
            free_storage(unit)
        return out

    def held_bytes(self) -> int:
        """Bytes this rank keeps from step to step, from live storages (each once): full
        buffers still allocated, shards, their gradients, the optimizer's state and the flat
        gradient buffer — the twin of :func:`simulator.zero.held_bytes` at stage 3."""
        seen: set[int] = set()
        total = 0
        tensors = [self.grad_buffer] + [u.full for u in self.units] + [u.shard for u in self.units]
        tensors += [u.shard.grad for u in self.units if u.shard.grad is not None]
        tensors += [v for s in self.optimizer.state.values() for v in s.values()
                    if isinstance(v, torch.Tensor) and v.numel() > 1]
        for t in tensors:
            storage = t.untyped_storage()
            if storage.nbytes() and storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
        return total
