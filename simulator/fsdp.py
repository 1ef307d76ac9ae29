"""FSDP — one training step of Fully Sharded Data Parallel: time, traffic and peak memory.

Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel", VLDB 2023,
§3 (chapter 20); twin of :mod:`backends.fsdp`. The model is cut into units; each rank keeps a
``1/N`` shard of every unit's flat parameters (padded to ``N·⌈Ψ_u/N⌉`` elements), its
gradient and its optimizer state. Per step, unit by unit:

* forward — all-gather the unit, compute, free it again (``reshard_after_forward``, §3.2.2);
* backward — all-gather it again (only if it was freed), compute, reduce-scatter its
  gradients, free it;
* the optimizer on the shards.

**Traffic** (Rajbhandari et al., SC 2020, §7.2.2 for the volumes): a ring all-gather or
reduce-scatter of ``n`` bytes sends ``(N−1)/N·n`` per rank, so a step sends
``3·(N−1)/N·Ψ`` elements' bytes when resharding after forward (two gathers and a
reduce-scatter: ZeRO-3's 1.5× of data parallelism's ``2Ψ``) and ``2·(N−1)/N·Ψ`` without
(one gather). With mixed precision (§3.4) the gathers move ``param_dtype`` bytes and the
reduce-scatter ``reduce_dtype`` bytes (:func:`traffic_bytes`).

**Time** (:func:`fsdp_step`): compute on the ranks' shared cores; each all-gather posted
whole (every rank sends its shard to every other, :func:`post_all_gather`) and waited for
only when its unit is needed; the reduce-scatter the chapter-2 ring, run right after the
unit's backward. *Prefetching* (§3.3.2) posts unit ``i+1``'s all-gather before unit ``i``'s
forward computes (unit ``i−1``'s before its backward), so the gather overlaps compute instead
of preceding it.

**Memory** (:func:`fsdp_step`'s ``alloc``/``free``, bytes): what a rank keeps
(:func:`held_bytes`: fp32 shards, their gradients, the optimizer's ``K`` bytes per shard
element, the flat gradient buffer), plus what the step allocates, in the real twin's order:
each gathered unit (``param`` bytes per padded element; two at a time with prefetching, every
unit from its forward to its backward without resharding) and its cast shard while it is
sent, the input cast to the compute dtype, each unit's saved activation (its output after
the parameter-free layer) and the pre-activation output while the activation runs, the
loss's temporaries, in backward the gradients of the unit's output and input and its fresh
parameter gradients, and the optimizer's temporaries (:func:`update_peak_bytes`). Not
counted, as in :mod:`simulator.zero`: the collectives' kept receive buffers and the batch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulator.collectives.reduce_scatter import ring_reduce_scatter
from simulator.core.comm import SimComm, SimGen, SimResult, run_spmd
from simulator.core.cores import CorePool, spend
from simulator.core.hardware import Cluster
from simulator.zero import (
    UPDATE_TEMPORARIES,
    Optimizer,
    UnitCost,
    bytes_per_parameter,
    shard_elements,
)


@dataclass(frozen=True)
class FsdpConfig:
    """How a step runs: resharding, prefetching, the dtypes' sizes (bytes per element of the
    gathered parameters and fresh gradients, of the reduce-scatter, of the shard) and the
    optimizer."""

    reshard_after_forward: bool = True
    prefetch: bool = True
    param_itemsize: int = 4
    reduce_itemsize: int = 4
    shard_itemsize: int = 4
    optimizer: Optimizer = "adam"


def padded_elements(numel: int, world: int) -> int:
    """A unit's flat buffer, padded to a multiple of ``world``: ``N·⌈Ψ_u/N⌉`` elements."""
    return shard_elements(numel, world) * world


def communication_volume(params: int, world: int, reshard_after_forward: bool = True,
                         itemsize: int = 4) -> float:
    """Closed form of the bytes each rank sends per step, ``Ψ`` divisible by ``N``: ``3·(N−1)/N
    ·Ψ`` element bytes resharding after forward, ``2·(N−1)/N·Ψ`` without (Rajbhandari et al.
    2020, §7.2.2)."""
    return (3 if reshard_after_forward else 2) * (world - 1) / world * params * itemsize


def traffic_bytes(units: Sequence[UnitCost], world: int, config: FsdpConfig = FsdpConfig()
                  ) -> float:
    """Bytes each rank sends in one step (ring collectives over the padded units): per unit
    one or two all-gathers in ``param_itemsize`` bytes and one reduce-scatter in
    ``reduce_itemsize`` bytes, ``(N−1)/N`` of each buffer."""
    gathers = 2 if config.reshard_after_forward else 1
    share = (world - 1) / world
    return math.fsum(share * padded_elements(u.numel, world)
                     * (gathers * config.param_itemsize + config.reduce_itemsize)
                     for u in units)


def model_state_bytes(units: Sequence[UnitCost], world: int,
                      config: FsdpConfig = FsdpConfig()) -> int:
    """A rank's model states: its shards and their gradients (``shard_itemsize`` each) and the
    optimizer state (fp32 ``K``: Adam 8 bytes per element) over ``Σ ⌈Ψ_u/N⌉`` elements —
    ZeRO-3's ``(4 + 4 + K)·Ψ/N`` in fp32 (Rajbhandari et al. 2020, §5.3)."""
    shard = sum(shard_elements(u.numel, world) for u in units)
    return shard * (2 * config.shard_itemsize
                    + bytes_per_parameter("fp32", config.optimizer).optimizer)


def held_bytes(units: Sequence[UnitCost], world: int, config: FsdpConfig = FsdpConfig()) -> int:
    """Bytes a rank keeps from step to step: its model states (:func:`model_state_bytes`)
    plus the flat gradient buffer, the largest padded unit in ``reduce_itemsize``, that each
    unit's gradients are reduce-scattered in."""
    flat = max(padded_elements(u.numel, world) for u in units) * config.reduce_itemsize
    return model_state_bytes(units, world, config) + flat


GATHER_TAG = 1
"""Message tag of unit ``i``'s all-gather: ``GATHER_TAG + i`` (the ring's is 0), as the real
twin tags them."""


def post_all_gather(comm: SimComm, index: int, shard_bytes: int) -> list[Any]:
    """Post unit ``index``'s direct all-gather (:func:`backends.fsdp.unit.unshard`): a
    receive of ``shard_bytes`` from every other rank, then a send of this rank's shard to
    each — nothing waited for; the works to wait on."""
    p, r, tag = comm.world_size, comm.rank, GATHER_TAG + index
    works = [comm.irecv(src, shard_bytes, tag) for src in range(p) if src != r]
    return works + [comm.isend(dst, shard_bytes, tag) for dst in range(p) if dst != r]


def fsdp_step(comm: SimComm, units: Sequence[UnitCost], config: FsdpConfig,
              shared: dict[str, Any]) -> SimGen:
    """Rank program of one step of :class:`backends.fsdp.FSDP` (see the module docstring),
    its allocations in the real twin's order. ``units`` in forward order, each but the last
    followed by a parameter-free activation that saves its output; ``shared``: ``cores``
    shared by every rank (processor sharing), ``update_measured_together`` (the units'
    ``update_s`` were timed with every rank stepping at once: not shared again),
    ``input_bytes`` and ``output_bytes`` (the batch's fp32 input and the model's fp32 output,
    for the input's cast and the loss's temporaries)."""
    p, n = comm.world_size, len(units)
    pool: CorePool | None = None
    if not math.isinf(shared["cores"]):
        pool = shared.setdefault("pool", CorePool(comm.env, shared["cores"]))
    pitem = config.param_itemsize
    cast = pitem != config.shard_itemsize
    pending: dict[int, list[Any] | None] = {}  # unit → its gather's works (None: waited)

    def act(i: int) -> int:  # unit i's output in the compute dtype, bytes
        return units[i].output_bytes * pitem // 4

    def shard(i: int) -> int:  # unit i's shard in the compute dtype, bytes
        return shard_elements(units[i].numel, p) * pitem

    def unshard(i: int) -> None:
        if 0 <= i < n and i not in pending:
            comm.alloc(shard(i) * p + (shard(i) if cast else 0))  # full, the cast shard
            pending[i] = post_all_gather(comm, i, shard(i)) if p > 1 else []

    def wait(i: int) -> SimGen:
        works = pending[i]
        if works is not None:
            for work in works:
                yield work.wait()
            comm.free(shard(i) if cast else 0)  # the cast shard it sent
            pending[i] = None

    def reshard(i: int) -> None:
        del pending[i]
        comm.free(shard(i) * p)

    comm.alloc(held_bytes(units, p, config))
    x_cast = shared["input_bytes"] * pitem // 4 if cast else 0
    for i, unit in enumerate(units):
        unshard(i)
        yield from wait(i)
        if config.prefetch:
            unshard(i + 1)
        if i == 0:
            comm.alloc(x_cast)  # the input cast to the compute dtype, saved for backward
        yield from spend(comm, unit.forward_s, f"forward {i}", pool)
        comm.alloc(act(i))  # the unit's output
        if config.reshard_after_forward:
            reshard(i)
        if i < n - 1:  # the activation's output, saved; its input goes
            comm.alloc(act(i))
            comm.free(act(i))
    out = shared["output_bytes"]
    float_copy = out if cast else 0
    comm.alloc(float_copy + out)  # the output in fp32, the difference (saved)
    comm.free(float_copy)
    comm.alloc(out)  # its square, reduced to the loss
    comm.free(out + act(n - 1))  # the square and the model's output (saved by nothing)
    comm.alloc(4 * out)  # the loss's backward: temporaries, and the output's gradient
    comm.free(4 * out)  # all but that gradient, and the saved difference
    if cast:
        comm.alloc(act(n - 1))
        comm.free(out)
    for i in reversed(range(n)):
        unit = units[i]
        unshard(i)
        yield from wait(i)
        if config.prefetch:
            unshard(i - 1)
        fresh = (act(i - 1) if i > 0 else 0) + unit.numel * pitem
        comm.alloc(fresh)  # the input's gradient, the parameters' gradients
        yield from spend(comm, unit.backward_s, f"backward {i}", pool)
        comm.free(act(i) + unit.numel * pitem)  # the output's gradient, the gradients
        if i == 0:
            comm.free(x_cast)
        padded = shard_elements(unit.numel, p) * p * config.reduce_itemsize
        if p > 1:
            yield from ring_reduce_scatter(comm, padded, config.reduce_itemsize)
        reshard(i)
        if i > 0:  # the activation before: its input's gradient in, its output's and the
            comm.alloc(act(i - 1))  # saved output out
            comm.free(2 * act(i - 1))
    update_s = math.fsum(u.update_s * shard_elements(u.numel, p) / max(u.numel, 1)
                         for u in units)
    yield from spend(comm, update_s, "optimizer step",
                     None if shared["update_measured_together"] else pool)
    comm.alloc(update_peak_bytes(units, p, config))
    comm.free(update_peak_bytes(units, p, config))


def update_peak_bytes(units: Sequence[UnitCost], world: int, config: FsdpConfig) -> int:
    """The most bytes the optimizer's temporaries take at once: single-tensor Adam allocates
    two shard-sized buffers per tensor (``√v``, then ``√v / c``, the first freed at once) and
    keeps the second until the next tensor's are made, so ``max_i (2·s_i + s_{i−1})`` over
    the shards ``s_i`` in bytes (SGD and momentum update in place: 0)."""
    per_tensor = UPDATE_TEMPORARIES[config.optimizer] // 2
    sizes = [0] + [shard_elements(u.numel, world) * config.shard_itemsize for u in units]
    return per_tensor * max(2 * b + a for a, b in itertools.pairwise(sizes))


def simulate_fsdp_step(cluster: Cluster, units: Sequence[UnitCost],
                       config: FsdpConfig = FsdpConfig(), input_bytes: int = 0,
                       output_bytes: int = 0, cores: float = math.inf,
                       update_measured_together: bool = False, trace: bool = True
                       ) -> SimResult:
    """One FSDP step on ``cluster`` (every rank data-parallel): makespan, per-rank finish,
    the trace and each rank's peak memory (``peak_memory_bytes``, :func:`fsdp_step`'s
    accounting). ``input_bytes``/``output_bytes``: the batch's fp32 input and the model's
    fp32 output (0: left out of the memory); ``cores``: CPU cores the ranks share
    (``math.inf``: one each)."""
    return run_spmd(cluster, fsdp_step, list(units), config,
                    {"cores": cores, "update_measured_together": update_measured_together,
                     "input_bytes": input_bytes, "output_bytes": output_bytes}, trace=trace)
