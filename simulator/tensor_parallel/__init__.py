"""Megatron-LM's 3D parallelism, simulated: tensor (t) × pipeline (p) × data (d) on a cluster.

Twin of :mod:`backends.tensor_parallel` (book chapter 12). A GPT (:mod:`simulator.transformer`)
trains on ``t·p·d`` GPUs, placed the way Megatron places them (Narayanan et al., SC 2021,
§3; Megatron-LM's ``initialize_model_parallel``)::

    global rank = pp·(t·d) + dp·t + tp        tensor groups: t consecutive ranks (one node)
                                              data groups:   stride t
                                              pipeline:      stride t·d

Each rank runs the schedule of :mod:`simulator.pipeline.schedules` (1F1B, or interleaved 1F1B
with ``v`` chunks). Inside every layer, forward and backward, the rank computes its ``1/t`` of
the matrix multiplications and joins its tensor group's all-reduces (Shoeybi et al. 2019: the
``g`` operator after the attention and after the MLP in the forward, the ``f`` operator before
each in the backward) — all-gathers and reduce-scatters instead with sequence parallelism
(Korthikanti et al. 2022). Between stages it sends ``b·s·h/t`` elements (scatter/gather,
Narayanan et al. §4.1), which the receivers all-gather inside their node. After the pipeline
flush each stage ring-all-reduces its gradients over its data group (optionally overlapped
with the last backward), the first and last stages all-reduce the shared word embedding's
gradient, and every rank steps its optimizer (Adam, memory bound).

**Two ways to run it.** :func:`simulate_megatron_full` runs one SimPy process per GPU with
every message on the cluster's network (the reference, fine for tens of GPUs).
:func:`simulate_megatron` is the fast path for thousands: it relies on the symmetry of the
grid —

1. every tensor group runs the same all-reduces at the same moments, on its own NVLink ports:
   one all-reduce is timed once, on the ``t`` GPUs of one group
   (:func:`~simulator.collectives.all_reduce.ring_phases_fast`), and added into each layer's
   time;
2. the ``t·d`` pipelines are identical and each uses only its own GPUs' ports: *one*
   pipeline, ``p`` ranks on a :func:`subcluster` that keeps their real links, is simulated by
   :func:`~simulator.pipeline.simulate.simulate_pipeline`, one "layer" per model chunk;
3. the ``t·p`` data-parallel rings all start when their stage finishes, each on its own
   ports: one ring per stage is timed on a :func:`subcluster` of its ``d`` GPUs; the
   embedding all-reduce is a two-rank simulation started at the two stages' finish times.

On :meth:`~simulator.core.hardware.Cluster.dgx` clusters every GPU has its own NVLink port
and its own NIC and the fabric never blocks, so different groups never share a channel: the
fast path then equals the full simulation (tests check it to 1e-9) — except when two pipeline
stages share a node, where the full simulation lets a stage's activation sends share an
NVLink port with its tensor all-reduces and the fast path does not. The overlapped gradient
all-reduce exists only on the fast path (buckets serialised, see
:func:`~simulator.tensor_parallel.fast._overlapped`).

Compute is the matrix multiplications, priced by shape on the device's GEMM model
(:mod:`simulator.core.gemm`: roofline, tile and wave quantisation, from the data sheets) —
or, with ``matmul_efficiency`` set, Narayanan et al.'s FLOP count at that fraction of peak —
plus ``bytes / HBM bandwidth`` for the elementwise kernels (layer norm, softmax, dropout,
GeLU, residual: :func:`~simulator.transformer.attention_elementwise_bytes`) and the optimizer
step. ``benchmarks/megatron_validation.py`` compares both with the published runs.

Where each concept lives (read in this order):

* :mod:`~simulator.tensor_parallel.config` — :class:`Grid` (Megatron's rank order) and
  :class:`MegatronConfig`, :func:`with_grid`;
* :mod:`~simulator.tensor_parallel.chunks` — what one rank does per micro-batch
  (:class:`Chunk`, :data:`Op`, :func:`chunks`) and the optimizer step (:func:`update_seconds`);
* :mod:`~simulator.tensor_parallel.moe_chunks` — the same with context parallelism (ring
  K/V passes), expert parallelism (all-to-alls) and mixture-of-experts layers
  (:mod:`simulator.moe_model`); the grid's ``cp`` and ``ep`` and the ``fsdp`` option (ZeRO-3
  states and ``3Ψ`` gradient traffic) run on the fast path only;
* :mod:`~simulator.tensor_parallel.memory` — bytes per GPU (:func:`memory_per_stage`,
  :func:`fits`);
* :mod:`~simulator.tensor_parallel.subcluster` — a cluster cut to one group (:func:`subcluster`);
* :mod:`~simulator.tensor_parallel.result` — :class:`MegatronResult`;
* :mod:`~simulator.tensor_parallel.fast` — :func:`simulate_megatron`, the fast path;
* :mod:`~simulator.tensor_parallel.full` — :func:`simulate_megatron_full` and its rank program
  :func:`megatron_rank`, the reference;
* :mod:`~simulator.tensor_parallel.gloo_all_gather` — :func:`waited_gloo_all_gather`, gloo's
  all-gather as this host waits for it (the lab's predictions, :mod:`lab.tensor_parallel`).
"""

from simulator.tensor_parallel.chunks import (
    ADAM_BYTES_PER_PARAMETER,
    Chunk,
    Op,
    matmul_model,
    update_seconds,
)
from simulator.tensor_parallel.config import Grid, MegatronConfig, with_grid
from simulator.tensor_parallel.fast import simulate_megatron
from simulator.tensor_parallel.full import megatron_rank, simulate_megatron_full
from simulator.tensor_parallel.gloo_all_gather import waited_gloo_all_gather
from simulator.tensor_parallel.memory import fits, memory_per_stage
from simulator.tensor_parallel.result import MegatronResult
from simulator.tensor_parallel.stages import chunks
from simulator.tensor_parallel.subcluster import subcluster

__all__ = [
    "ADAM_BYTES_PER_PARAMETER", "Chunk", "Grid", "MegatronConfig", "MegatronResult", "Op",
    "chunks", "fits", "matmul_model", "megatron_rank", "memory_per_stage", "simulate_megatron",
    "simulate_megatron_full", "subcluster", "update_seconds", "waited_gloo_all_gather",
    "with_grid",
]
