"""ZeRO — the Zero Redundancy Optimizer's memory and communication, stage by stage.

Rajbhandari, Rasley, Ruwase & He, "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models", SC 2020 (book chapter 14). Data parallelism keeps ``N_d`` full copies of the
*model states* — parameters, gradients and optimizer state. ZeRO partitions them over the
``N_d`` data-parallel ranks instead:

=========  ==============================  =====================================  ==============
stage      sharded                         model states per device (mixed Adam)    traffic/step
=========  ==============================  =====================================  ==============
0 (DDP)    nothing                         ``(2 + 2 + K)·Ψ``                       ``2Ψ``
1 (P_os)   optimizer state                 ``4Ψ + K·Ψ/N_d``                        ``2Ψ``
2 (P_g)    + gradients                     ``2Ψ + (2 + K)·Ψ/N_d``                  ``2Ψ``
3 (P_p)    + parameters                    ``(4 + K)·Ψ/N_d``                       ``3Ψ``
=========  ==============================  =====================================  ==============

with ``Ψ`` parameters and ``K = 12`` bytes per parameter of optimizer state for mixed-precision
Adam (fp32 master weights, momentum and variance); the traffic column counts elements each rank
sends and receives, up to the factor ``(N_d − 1)/N_d`` of the ring. Stages 1–2 reduce-scatter the
gradients and all-gather the updated parameters — a ring all-reduce split in two, so the same
volume as plain data parallelism. Stage 3 all-gathers each layer's parameters again for the
backward pass: one extra all-gather, 1.5× the traffic.

Everything here is arithmetic except :func:`step_communication`, which times the collectives on
a cluster model (:mod:`simulator.collectives`' ring fast path, so thousands of ranks are cheap),
and :func:`simulate_zero_step`, the rank program of one whole training step of the real twin
(:mod:`backends.zero`): compute per unit, the stage's collectives per unit, the optimizer on the
shard, and the bytes a rank holds along the way — its peak is the model states above plus what
the step allocates on top (:func:`held_bytes`, :func:`zero_step`). Bytes are bytes; times are
seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from simulator.collectives.all_gather import ring_all_gather
from simulator.collectives.all_reduce import ring_all_reduce, ring_phases_fast
from simulator.collectives.reduce_scatter import ring_reduce_scatter
from simulator.core.comm import SimComm, SimGen, SimResult, run_spmd
from simulator.core.cores import CorePool, spend
from simulator.core.hardware import Cluster

Precision = Literal["mixed", "fp32"]
Optimizer = Literal["adam", "sgd", "momentum"]
STAGES = (0, 1, 2, 3)
PRECISIONS: tuple[Precision, ...] = ("mixed", "fp32")
OPTIMIZERS: tuple[Optimizer, ...] = ("adam", "sgd", "momentum")


@dataclass(frozen=True)
class Bytes:
    """Bytes per parameter of each model state (ZeRO §3's accounting)."""

    parameter: int
    gradient: int
    optimizer: int


def bytes_per_parameter(precision: Precision = "mixed", optimizer: Optimizer = "adam") -> Bytes:
    """Bytes each model state takes per parameter.

    Mixed precision (Micikevicius et al. 2018) keeps fp16 parameters and gradients (2 + 2 bytes)
    and, in the optimizer, an fp32 master copy (4) plus the optimizer's own fp32 state: Adam's
    momentum and variance (4 + 4, so ``K = 12``), SGD with momentum's one buffer (``K = 8``),
    plain SGD none (``K = 4``). In fp32 there is no master copy: parameters and gradients take 4
    bytes each and ``K`` is just the optimizer state (Adam 8, momentum 4, SGD 0) — what
    ``torch.optim.Adam`` allocates for fp32 parameters.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose mixed or fp32")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose adam, momentum or sgd")
    state = {"adam": 8, "momentum": 4, "sgd": 0}[optimizer]
    if precision == "mixed":
        return Bytes(parameter=2, gradient=2, optimizer=4 + state)
    return Bytes(parameter=4, gradient=4, optimizer=state)


@dataclass(frozen=True)
class ModelStates:
    """Model-state bytes on one device (the largest shard, when ``Ψ`` does not divide)."""

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        """All model states, bytes."""
        return self.parameters + self.gradients + self.optimizer

    def as_dict(self) -> dict[str, int]:
        """The parts and the total, for JSON."""
        return {**asdict(self), "total": self.total}


def shard_elements(params: int, dp: int) -> int:
    """Elements of the largest shard when ``params`` are split over ``dp`` ranks: ``⌈Ψ/N_d⌉``
    (the flat buffer is padded to a multiple of ``N_d``, as ZeRO implementations do)."""
    return -(-params // dp)


def _check(params: int, stage: int, dp: int) -> None:
    if params < 0:
        raise ValueError(f"the number of parameters must be ≥ 0, got {params}")
    if stage not in STAGES:
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage}")
    if dp < 1:
        raise ValueError(f"the data-parallel degree must be ≥ 1, got {dp}")


def model_state_bytes(params: int, stage: int, dp: int, precision: Precision = "mixed",
                      optimizer: Optimizer = "adam") -> ModelStates:
    """Model-state bytes per device at ZeRO ``stage`` with ``dp`` data-parallel ranks.

    Stage 1 shards the optimizer state, stage 2 the gradients too, stage 3 the parameters too;
    a sharded state takes ``⌈Ψ/N_d⌉`` elements per device, a replicated one ``Ψ``. For mixed
    Adam and ``Ψ`` divisible by ``N_d`` the total is the paper's 16Ψ, 4Ψ + 12Ψ/N_d,
    2Ψ + 14Ψ/N_d and 16Ψ/N_d.
    """
    _check(params, stage, dp)
    b = bytes_per_parameter(precision, optimizer)
    shard = shard_elements(params, dp)
    return ModelStates(parameters=b.parameter * (shard if stage >= 3 else params),
                       gradients=b.gradient * (shard if stage >= 2 else params),
                       optimizer=b.optimizer * (shard if stage >= 1 else params))


def max_parameters(memory_bytes: float, stage: int, dp: int, precision: Precision = "mixed",
                   optimizer: Optimizer = "adam") -> int:
    """The largest ``Ψ`` whose model states fit in ``memory_bytes`` per device (activations and
    buffers not counted): ZeRO's "how big a model fits" (paper Figure 1 / Table 1)."""
    _check(0, stage, dp)
    b = bytes_per_parameter(precision, optimizer)
    per_param = sum(size / (dp if stage >= s else 1) for size, s in
                    ((b.optimizer, 1), (b.gradient, 2), (b.parameter, 3)))
    guess = int(memory_bytes / per_param)
    while guess > 0 and model_state_bytes(guess, stage, dp, precision, optimizer).total \
            > memory_bytes:  # ⌈Ψ/N_d⌉ can add up to one element per shard
        guess -= max(1, dp)
    return max(guess, 0)


@dataclass(frozen=True)
class Collective:
    """One collective of a training step: its kind and the bytes of the full buffer."""

    kind: Literal["all_reduce", "reduce_scatter", "all_gather"]
    nbytes: int
    purpose: str


def step_collectives(params: int, stage: int, dp: int, precision: Precision = "mixed",
                     optimizer: Optimizer = "adam") -> list[Collective]:
    """The collectives one training step runs, in order (gradients and parameters travel in
    the training precision: fp16 when mixed).

    * stage 0: all-reduce the gradients;
    * stages 1 and 2: reduce-scatter the gradients (each rank keeps the shard it updates), then
      all-gather the updated parameters (the ring all-reduce cut in two);
    * stage 3: all-gather the parameters before the forward pass and again before the
      backward pass (they were freed in between), reduce-scatter the gradients.
    """
    _check(params, stage, dp)
    b = bytes_per_parameter(precision, optimizer)
    grads, weights = params * b.gradient, params * b.parameter
    if stage == 0:
        return [Collective("all_reduce", grads, "average the gradients")]
    if stage in (1, 2):
        return [Collective("reduce_scatter", grads, "sum each gradient shard on its owner"),
                Collective("all_gather", weights, "share the updated parameter shards")]
    return [Collective("all_gather", weights, "gather the parameters for the forward pass"),
            Collective("all_gather", weights, "gather them again for the backward pass"),
            Collective("reduce_scatter", grads, "sum each gradient shard on its owner")]


def ring_volume(kind: str, nbytes: int, dp: int) -> float:
    """Bytes one rank sends in a ring collective of an ``nbytes`` buffer: ``(N_d−1)/N_d·n`` for a
    reduce-scatter or an all-gather, twice that for an all-reduce."""
    share = (dp - 1) / dp * nbytes
    return 2 * share if kind == "all_reduce" else share


def communication_bytes(params: int, stage: int, dp: int, precision: Precision = "mixed",
                        optimizer: Optimizer = "adam") -> float:
    """Bytes each rank sends per step (ring collectives): ``2(N_d−1)/N_d·Ψ`` gradient-sized
    buffers for stages 0–2, ``3(N_d−1)/N_d·Ψ`` for stage 3 — ZeRO's 1.5×."""
    return sum(ring_volume(c.kind, c.nbytes, dp)
               for c in step_collectives(params, stage, dp, precision, optimizer))


def step_communication(cluster: Cluster, params: int, stage: int,
                       precision: Precision = "mixed", optimizer: Optimizer = "adam"
                       ) -> list[dict[str, Any]]:
    """Each collective of a step timed on ``cluster`` (all its ranks data-parallel), seconds:
    ring reduce-scatter and all-gather phases on the cluster's network and contention model,
    not overlapped with compute (an upper bound on the exposed time)."""
    dp = cluster.world_size
    rows = []
    for c in step_collectives(params, stage, dp, precision, optimizer):
        itemsize = 2 if precision == "mixed" else 4
        if dp == 1:
            seconds = 0.0
        else:
            seconds = ring_phases_fast(cluster, c.nbytes, itemsize,
                                       reduce_scatter=c.kind != "all_gather",
                                       all_gather=c.kind != "reduce_scatter")
        rows.append({"kind": c.kind, "purpose": c.purpose, "bytes": c.nbytes,
                     "sent_bytes_per_rank": ring_volume(c.kind, c.nbytes, dp),
                     "time_s": seconds})
    return rows


def simulate_zero(params: int, stage: int, dp: int, precision: Precision = "mixed",
                  optimizer: Optimizer = "adam", cluster: Cluster | None = None
                  ) -> dict[str, Any]:
    """Everything about one configuration: model states per device (and their parts), bytes
    sent per rank per step, and — given a cluster of ``dp`` ranks — the time of each collective.
    What ``distml-lab simulate zero`` prints."""
    states = model_state_bytes(params, stage, dp, precision, optimizer)
    doc: dict[str, Any] = {
        "params": params, "stage": stage, "dp": dp, "precision": precision,
        "optimizer": optimizer,
        "model_state_bytes_per_device": states.total,
        "model_states": states.as_dict(),
        "replicated_bytes_per_device": model_state_bytes(params, 0, dp, precision,
                                                         optimizer).total,
        "communication_bytes_per_step": communication_bytes(params, stage, dp, precision,
                                                            optimizer),
    }
    if cluster is not None:
        if cluster.world_size != dp:
            raise ValueError(f"the cluster has {cluster.world_size} ranks but dp is {dp}")
        rows = step_communication(cluster, params, stage, precision, optimizer)
        doc["cluster"] = cluster.name
        doc["collectives"] = rows
        doc["communication_time_s"] = math.fsum(r["time_s"] for r in rows)
    return doc


# ---- one training step, rank by rank (the twin of backends.zero) ---------------------------

@dataclass(frozen=True)
class UnitCost:
    """One unit of :class:`backends.zero.Zero` (a module's flat parameters): its size and the
    one-core seconds it costs — measured on one process (a profile), or from a workload model.

    Attributes:
        numel: parameters of the unit.
        forward_s: forward time of the unit (and the parameter-free layers after it), s.
        backward_s: its backward time, s.
        update_s: the optimizer's step over *all* ``numel`` parameters, s (a shard of ``k``
            elements costs ``k/numel`` of it).
        output_bytes: bytes of the unit's output at the step's batch (after the
            parameter-free layers that follow it) — the activation backward keeps, and the
            size of its gradient; 0 leaves activations out of the memory model.
    """

    numel: int
    forward_s: float
    backward_s: float
    update_s: float
    output_bytes: int = 0


UPDATE_TEMPORARIES = {"adam": 2, "momentum": 0, "sgd": 0}
"""Shard-sized buffers the optimizer allocates while it steps one tensor: ``torch.optim``'s
single-tensor Adam computes its denominator out of place, ``√v`` then ``÷`` (two buffers);
SGD and momentum update in place."""


def held_bytes(units: Sequence[UnitCost], stage: int, dp: int, itemsize: int = 4,
               optimizer: Optimizer = "adam") -> int:
    """Bytes a rank of :class:`backends.zero.Zero` keeps from step to step: the model states of
    :func:`model_state_bytes` in the real twin's precision (``itemsize``-byte parameters and
    gradients, fp32 ``K``: Adam's ``4 + 4 + 8`` bytes per parameter unpartitioned) counted
    over each unit's padded flat buffer — ``⌈Ψ_u/N_d⌉`` elements per shard, ``N_d`` shards for
    a replicated state — plus, at stages 2–3, the flat gradient buffer the size of the
    largest unit that each unit's gradients are reduce-scattered from."""
    _check(0, stage, dp)
    k = bytes_per_parameter("fp32", optimizer).optimizer * itemsize // 4
    shard = sum(shard_elements(u.numel, dp) for u in units)
    full = shard * dp
    scratch = max(shard_elements(u.numel, dp) * dp for u in units) if stage >= 2 else 0
    return (itemsize * ((shard if stage >= 3 else full) + (shard if stage >= 2 else full)
                        + scratch) + k * (shard if stage >= 1 else full))


def zero_step(comm: SimComm, units: Sequence[UnitCost], stage: int, itemsize: int,
              shared: dict[str, Any]) -> SimGen:
    """Rank program of one step of :class:`backends.zero.Zero`, in its order and without
    overlap (the real twin runs every collective synchronously):

    * forward, unit by unit — stage 3 all-gathers each unit's parameters first;
    * backward, in reverse — stage 3 all-gathers again before each unit, stages 2–3
      reduce-scatter each unit's gradients right after it;
    * stages 0–1 reduce every unit's gradients after backward (all-reduce, or reduce-scatter);
    * the optimizer on this rank's elements (all of them at stage 0, a shard otherwise);
    * stages 1–2 all-gather the updated shards.

    Units are padded to a multiple of the world size, as the real twin pads them. Compute runs
    on a pool of ``shared["cores"]`` cores shared by all ranks (processor sharing).

    Memory (``comm.alloc``/``free``, bytes): what the rank keeps (:func:`held_bytes`); each
    unit's output from its forward to its backward (:attr:`UnitCost.output_bytes`); at stage
    3 each gathered unit, forward and backward; in backward the gradient of the unit's output
    and input and its fresh parameter gradients (added into the flat gradient at stages 0–1,
    held until the unit is reduce-scattered at 2–3); the optimizer's temporaries
    (:data:`UPDATE_TEMPORARIES`) for the largest tensor it steps. Not counted: the
    collectives' receive buffers and the caller's input batch.
    """
    p = comm.world_size
    pool: CorePool | None = None
    if not math.isinf(shared["cores"]):
        pool = shared.setdefault("pool", CorePool(comm.env, shared["cores"]))

    def compute(seconds: float, name: str, shared_cores: bool = True) -> SimGen:
        yield from spend(comm, seconds, name, pool if shared_cores else None)

    def padded(unit: UnitCost) -> int:
        return shard_elements(unit.numel, p) * p * itemsize

    def collective(kind: str, unit: UnitCost) -> SimGen:
        if p == 1:
            return
        program = {"all_gather": ring_all_gather, "reduce_scatter": ring_reduce_scatter,
                   "all_reduce": ring_all_reduce}[kind]
        yield from program(comm, padded(unit), itemsize)

    def gathered(unit: UnitCost) -> int:
        return padded(unit) if stage == 3 else 0

    comm.alloc(held_bytes(units, stage, p, itemsize, shared["optimizer"]))
    for i, unit in enumerate(units):
        comm.alloc(gathered(unit))
        if stage == 3:
            yield from collective("all_gather", unit)
        yield from compute(unit.forward_s, f"forward {i}")
        comm.alloc(unit.output_bytes)
        comm.free(gathered(unit))
    comm.alloc(units[-1].output_bytes)  # the loss's gradient
    for i, unit in reversed(list(enumerate(units))):
        comm.alloc(gathered(unit))
        if stage == 3:
            yield from collective("all_gather", unit)
        fresh = (units[i - 1].output_bytes if i > 0 else 0) + unit.numel * itemsize
        comm.alloc(fresh)
        yield from compute(unit.backward_s, f"backward {i}")
        if stage >= 2:
            yield from collective("reduce_scatter", unit)
        comm.free(fresh - (units[i - 1].output_bytes if i > 0 else 0) + 2 * unit.output_bytes
                  + gathered(unit))
    if stage <= 1:
        for unit in units:
            yield from collective("all_reduce" if stage == 0 else "reduce_scatter", unit)
    update_s = math.fsum(u.update_s if stage == 0 else
                         u.update_s * shard_elements(u.numel, p) / max(u.numel, 1)
                         for u in units)
    stepped = max(padded(u) if stage == 0 else padded(u) // p for u in units)
    comm.alloc(UPDATE_TEMPORARIES[shared["optimizer"]] * stepped)
    yield from compute(update_s, "optimizer step", not shared["update_measured_together"])
    comm.free(UPDATE_TEMPORARIES[shared["optimizer"]] * stepped)
    if stage in (1, 2):
        for unit in units:
            yield from collective("all_gather", unit)


def simulate_zero_step(cluster: Cluster, units: Sequence[UnitCost], stage: int,
                       itemsize: int = 4, cores: float = math.inf,
                       update_measured_together: bool = False,
                       optimizer: Optimizer = "adam", trace: bool = True) -> SimResult:
    """One training step of ZeRO ``stage`` on ``cluster`` (every rank data-parallel): makespan,
    per-rank finish, the trace of compute and messages, and each rank's peak memory over the
    step (``peak_memory_bytes``, what :func:`zero_step` counts). ``cores``: CPU cores the ranks
    share (``math.inf``: one each, e.g. GPUs). ``update_measured_together``: the units'
    ``update_s`` were measured with every rank updating at once (memory bandwidth and cores
    already shared), so the optimizer step does not go through the core pool again.
    ``trace``: record the timeline (off: faster, an empty trace)."""
    _check(0, stage, cluster.world_size)
    return run_spmd(cluster, zero_step, list(units), stage, itemsize,
                    {"cores": cores, "update_measured_together": update_measured_together,
                     "optimizer": optimizer}, trace=trace)
