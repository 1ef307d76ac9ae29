"""Choosing a 3D-parallel configuration: every (t, p, d, micro-batch), ranked by the simulator.

Narayanan et al. (SC 2021, §3.3, "Takeaways") give rules of thumb: keep tensor parallelism
inside a node (``t ≤ 8``), use pipeline parallelism to fit the model across nodes, then use
the remaining GPUs for data parallelism; pick the micro-batch size that balances arithmetic
intensity against the pipeline bubble. :func:`plan` tries every configuration instead:

1. **enumerate** ``t`` (a power of two dividing the heads, at most ``max_t``), ``p`` (dividing
   the layers), the context sizes ``cp`` asked for, ``d = N/(t·p·cp)``, the expert-parallel
   sizes ``ep`` (dividing the experts and ``d·cp``), micro-batch ``b`` (``B`` divisible by
   ``b·d``), the interleaving ``v`` and FSDP off/on as asked for;
2. **skip** what does not fit: model states and activations per GPU
   (:func:`~simulator.tensor_parallel.memory_per_stage`) above the device's memory;
3. **simulate** the rest (:func:`~simulator.tensor_parallel.simulate_megatron`, the fast
   path) and rank by throughput, sequences per second.

Steps 1–2 (:func:`screen`) cost milliseconds per configuration; step 3 costs what its pipeline
simulation costs, an event per micro-batch pass (:func:`passes`). A caller can therefore size
the search after :func:`screen` and before any simulation (``lab.megatron`` refuses what would
exceed a time budget), then hand the screened list to :func:`plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from simulator.core.hardware import Cluster, Device
from simulator.tensor_parallel import (
    Grid,
    MegatronConfig,
    chunks,
    memory_per_stage,
    simulate_megatron,
)
from simulator.transformer import GPT, Recompute

MICRO_BATCHES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Candidate:
    """One configuration tried: its shape, its memory, and — if it fits — its prediction."""

    t: int
    p: int
    d: int
    micro_batch: int
    interleave: int
    memory_per_gpu_bytes: float
    fits: bool
    iteration_time_s: float | None = None
    tflops_per_gpu: float | None = None
    samples_per_s: float | None = None
    cp: int = 1
    ep: int = 1
    fsdp: bool = False

    def as_dict(self) -> dict[str, Any]:
        """For JSON and tables."""
        return {"tp": self.t, "pp": self.p, "dp": self.d, "micro_batch": self.micro_batch,
                "interleave": self.interleave, "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
                "fits": self.fits, "iteration_time_s": self.iteration_time_s,
                "tflops_per_gpu": self.tflops_per_gpu, "samples_per_s": self.samples_per_s,
                "cp": self.cp, "ep": self.ep, "fsdp": self.fsdp}


def _powers_of_two(limit: int) -> Iterator[int]:
    x = 1
    while x <= limit:
        yield x
        x *= 2


def configurations(model: GPT, gpus: int, global_batch: int, *, max_t: int = 8,
                   micro_batches: Sequence[int] = MICRO_BATCHES,
                   interleave: Sequence[int] = (1,), recompute: Recompute = "full",
                   sequence_parallel: bool = False,
                   matmul_efficiency: float | None = None, cps: Sequence[int] = (1,),
                   eps: Sequence[int] | None = (1,), fsdp: Sequence[bool] = (False,)
                   ) -> Iterator[MegatronConfig]:
    """Every valid configuration on ``gpus`` GPUs (step 1 of :func:`plan`); ``cps``: context
    sizes tried; ``eps``: expert-parallel sizes (``None``: every power of two dividing the
    experts and ``d·cp``); ``fsdp``: with and/or without ZeRO-3."""
    experts = getattr(model, "experts", 0)
    for t, p, d, cp in _grids(model, gpus, max_t, cps):
        for ep in (eps if eps is not None else
                   [e for e in _powers_of_two(d * cp) if not experts % e] if experts else [1]):
            if (d * cp) % ep or (ep > 1 and (not experts or experts % ep)):
                continue
            for b, v, z in _options(model, global_batch, p, d, micro_batches, interleave, fsdp):
                yield MegatronConfig(model, Grid(t, p, d, cp, ep), global_batch, b,
                                     recompute=recompute, sequence_parallel=sequence_parallel,
                                     interleave=v, matmul_efficiency=matmul_efficiency,
                                     fsdp=z)


def _grids(model: GPT, gpus: int, max_t: int, cps: Sequence[int]
           ) -> Iterator[tuple[int, int, int, int]]:
    for t in _powers_of_two(min(max_t, gpus)):
        if model.heads % t or gpus % t:
            continue
        for cp in cps:
            if gpus % (t * cp) or model.seq % cp:
                continue
            for p in range(1, model.layers + 1):
                if not (model.layers % p or gpus % (t * p * cp)):
                    yield t, p, gpus // (t * p * cp), cp


def _options(model: GPT, global_batch: int, p: int, d: int, micro_batches: Sequence[int],
             interleave: Sequence[int], fsdp: Sequence[bool]
             ) -> Iterator[tuple[int, int, bool]]:
    """Micro-batch, interleaving and FSDP choices that split the batch and the layers."""
    for b in micro_batches:
        if global_batch % (b * d):
            continue
        for v in interleave:
            m = global_batch // (b * d)
            if v > 1 and (p == 1 or model.layers % (p * v) or m % p):
                continue
            for z in fsdp:
                yield b, v, z


def passes(config: MegatronConfig) -> int:
    """Micro-batch passes one pipeline simulation of ``config`` runs, ``m·p·v`` (each a
    forward and a backward): what simulating ``config`` costs grows with it."""
    return config.microbatches * config.grid.p * config.interleave


@dataclass(frozen=True)
class Screened:
    """One configuration of :func:`configurations` with its peak memory per GPU, bytes."""

    config: MegatronConfig
    memory_per_gpu_bytes: float
    fits: bool


def screen(model: GPT, device: Device, gpus: int, global_batch: int,
           **options: Any) -> list[Screened]:
    """Steps 1–2 of :func:`plan`: every configuration on ``gpus`` GPUs of ``device``, with its
    memory per GPU (:func:`~simulator.tensor_parallel.memory_per_stage`) and whether it fits."""
    rows = []
    for config in configurations(model, gpus, global_batch, **options):
        parts = chunks(config, device.flops_per_s)  # memory does not depend on the rate
        memory = max(m["total"] for m in memory_per_stage(config, parts))
        rows.append(Screened(config, memory, memory <= device.memory_bytes))
    return rows


def plan(model: GPT, cluster: Cluster, global_batch: int, *,
         screened: Sequence[Screened] | None = None,
         simulated: Callable[[MegatronConfig], None] | None = None,
         **options: Any) -> list[Candidate]:
    """Every configuration of :func:`configurations` on ``cluster``: the ones that fit ranked
    by predicted throughput (fastest first), then the ones that do not fit.

    ``screened`` is :func:`screen`'s answer if the caller has it already; ``simulated`` is
    called after each configuration is simulated (a progress bar)."""
    if screened is None:
        screened = screen(model, cluster.devices[0], cluster.world_size, global_batch,
                          **options)
    fitting, skipped = [], []
    for row in screened:
        config, memory, g = row.config, row.memory_per_gpu_bytes, row.config.grid
        if not row.fits:
            skipped.append(Candidate(g.t, g.p, g.d, config.micro_batch, config.interleave,
                                     memory, False, cp=g.cp, ep=g.ep, fsdp=config.fsdp))
            continue
        r = simulate_megatron(cluster, config)
        fitting.append(Candidate(g.t, g.p, g.d, config.micro_batch, config.interleave, memory,
                                 True, r.iteration_time_s, r.tflops_per_gpu,
                                 global_batch / r.iteration_time_s, g.cp, g.ep, config.fsdp))
        if simulated is not None:
            simulated(config)
    fitting.sort(key=lambda c: (-(c.samples_per_s or 0.0), c.t, c.p, c.micro_batch))
    return fitting + skipped
