"""What one tensor-parallel rank does: its model chunks' ops for one micro-batch (compute
seconds and tensor-group collectives, Shoeybi et al. 2019; Korthikanti et al. 2022) and the
optimizer step after the flush.

Compute is the matrix multiplications plus ``bytes / HBM bandwidth`` for the elementwise
kernels. The GEMMs are priced by shape (:class:`~simulator.core.gemm.GemmModel`: roofline,
tile and wave quantisation) on a GPU with a model in
:data:`~simulator.core.hardware.GEMM_MODELS`, each backward GEMM with its own shape; with a
``matmul_efficiency`` set (teaching), or on a device without a model, they take
``FLOPs / (peak · efficiency)`` and a backward twice its forward. Collectives are in bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from simulator.core.gemm import Gemm, GemmModel
from simulator.core.hardware import GEMM_MODELS, Device
from simulator.tensor_parallel.config import MegatronConfig
from simulator.transformer import (
    FP16,
    activation_bytes_per_layer,
    attention_core_flops,
    attention_core_gemms,
    attention_elementwise_bytes,
    attention_forward_flops,
    attention_gemms,
    embedding_activation_bytes,
    full_activation_bytes_per_layer,
    layer_parameters,
    logit_forward_flops,
    logit_gemm,
    mlp_elementwise_bytes,
    mlp_forward_flops,
    mlp_gemms,
    output_activation_bytes,
)

ADAM_BYTES_PER_PARAMETER = 28
"""Bytes the mixed-precision Adam step moves per parameter: reads the fp16 gradient and the
fp32 master weight, momentum and variance, writes those three and the fp16 weight
(2 + 12 + 12 + 2): a memory-bound kernel."""


Op = tuple[str, float]
"""``("compute", seconds)`` or (``"all_reduce"`` | ``"all_gather"`` | ``"reduce_scatter"``,
bytes over the tensor group), ``("cp_ring", bytes)`` (``cp − 1`` ring passes of a K/V block,
:mod:`~simulator.tensor_parallel.moe_chunks`) or ``("all_to_all", bytes)`` (a rank's whole
input to an expert-group all-to-all)."""


@dataclass(frozen=True)
class Chunk:
    """One virtual stage (a model chunk) on one rank, for one micro-batch.

    Attributes:
        forward / backward: the ops in order (a backward starts with the recomputation).
        stash_bytes: activation bytes kept from its forward to its backward.
        transient_bytes: extra bytes alive during its backward (recomputed activations).
        input_bytes / output_bytes: bytes received from / sent to the neighbouring stage.
        parameters: parameters this rank holds for the chunk.
        expert_parameters: how many of them are experts' (sharded ``ep`` ways, reduced over
            the expert-data group).
    """

    forward: tuple[Op, ...]
    backward: tuple[Op, ...]
    stash_bytes: float
    transient_bytes: float
    input_bytes: int
    output_bytes: int
    parameters: int
    expert_parameters: int = 0


def matmul_model(config: MegatronConfig, device: Device) -> tuple[float, GemmModel | None]:
    """What prices ``config``'s GEMMs on ``device``: ``(flops_per_s, gemm)`` for
    :func:`chunks` — the flat ``peak · matmul_efficiency`` when the configuration sets an
    efficiency, else the device's GEMM model (``None`` where it has none: its peak)."""
    if config.matmul_efficiency is not None:
        return device.flops_per_s * config.matmul_efficiency, None
    return device.flops_per_s, GEMM_MODELS.get(device)


def _gemm_s(gemm: GemmModel, gemms: Iterable[Gemm]) -> float:
    return math.fsum(gemm.seconds(g, FP16) for g in gemms)


def _backward(gemms: Iterable[Gemm]) -> list[Gemm]:
    return [d for g in gemms for d in g.backward()]


def _layer_ops(config: MegatronConfig, flops_per_s: float, mem_bandwidth_Bps: float,
               gemm: GemmModel | None) -> tuple[list[Op], list[Op]]:
    """A transformer layer's forward and backward ops on one tensor-parallel rank.

    A block's compute is its matrix multiplications (by ``gemm``, or its FLOPs at
    ``flops_per_s``) plus its elementwise kernels' HBM bytes at ``mem_bandwidth_Bps``. The
    backward runs each GEMM's two backward GEMMs (twice the FLOPs) and twice the elementwise
    bytes (reading the saved tensors and the gradients, writing gradients — our assumption).
    """
    model, b, t, sp = config.model, config.micro_batch, config.grid.t, config.sequence_parallel
    n = FP16 * b * model.seq * model.hidden  # bytes of one b×s×h activation

    def block(flops: float, gemms: tuple[Gemm, ...], nbytes: float) -> tuple[Op, Op]:
        memory = nbytes / mem_bandwidth_Bps
        if gemm is None:
            forward_s = flops / t / flops_per_s + memory
            return ("compute", forward_s), ("compute", 2 * forward_s)
        return (("compute", _gemm_s(gemm, gemms) + memory),
                ("compute", _gemm_s(gemm, _backward(gemms)) + 2 * memory))

    attention, attention_back = block(attention_forward_flops(model, b),
                                      attention_gemms(model, b, t),
                                      attention_elementwise_bytes(model, b, t, sp))
    mlp, mlp_back = block(mlp_forward_flops(model, b), mlp_gemms(model, b, t),
                          mlp_elementwise_bytes(model, b, t, sp))
    if t == 1:
        forward = [attention, mlp]
        backward_mlp = [mlp_back]
        backward_attention = [attention_back]
    elif config.sequence_parallel:  # g: all-gather fwd / reduce-scatter bwd; ḡ the reverse
        forward = [("all_gather", n), attention, ("reduce_scatter", n),
                   ("all_gather", n), mlp, ("reduce_scatter", n)]
        backward_mlp = [("all_gather", n), mlp_back, ("reduce_scatter", n)]
        backward_attention = [("all_gather", n), attention_back, ("reduce_scatter", n)]
    else:  # g after each block in the forward, f before each in the backward
        forward = [attention, ("all_reduce", n), mlp, ("all_reduce", n)]
        backward_mlp = [mlp_back, ("all_reduce", n)]
        backward_attention = [attention_back, ("all_reduce", n)]
    if config.recompute == "full":
        again = list(forward)
    elif config.recompute == "selective":
        softmax = 9 * model.heads * model.seq ** 2 * b / t  # softmax and its dropout again
        again = [block(attention_core_flops(model, b), attention_core_gemms(model, b, t),
                       softmax)[0]]
    else:
        again = []
    return forward, again + backward_mlp + backward_attention


def dense_chunks(config: MegatronConfig, flops_per_s: float,
                 mem_bandwidth_Bps: float = math.inf, gemm: GemmModel | None = None
                 ) -> list[Chunk]:
    """The ``p·v`` virtual stages of a dense model without context parallelism, in pipeline
    order, as one tensor-parallel rank runs them (:func:`simulator.tensor_parallel.stages.chunks`
    chooses between this and :func:`~simulator.tensor_parallel.moe_chunks.moe_chunks`).

    The first chunk also holds the word and position embeddings (vocabulary-parallel: an
    all-reduce — a reduce-scatter with sequence parallelism — of its output); the last one
    the final layer norm and the output layer (the logits ``2bshV/t`` FLOPs, the gradient of
    its input all-reduced in the backward). A chunk after the first all-gathers its input
    when ``scatter_gather`` sends ``1/t`` of it (not needed with sequence parallelism).
    ``mem_bandwidth_Bps`` prices the elementwise kernels (``math.inf``: free); ``gemm``, if
    given, the matrix multiplications by shape (else their FLOPs at ``flops_per_s``; see
    :func:`matmul_model`).
    """
    model, g, b = config.model, config.grid, config.micro_batch
    t, k = g.t, config.chunks
    per_chunk = model.layers // k
    n = FP16 * b * model.seq * model.hidden
    layer_fwd, layer_bwd = _layer_ops(config, flops_per_s, mem_bandwidth_Bps, gemm)
    stash = activation_bytes_per_layer(model, b, t, config.sequence_parallel, config.recompute)
    transient = 0.0 if config.recompute == "none" else (
        full_activation_bytes_per_layer(model, b, t, config.sequence_parallel) - stash)
    split = t > 1 and (config.scatter_gather or config.sequence_parallel)
    p2p = n // t if split else n
    gather: list[Op] = [("all_gather", n)] if t > 1 and split and not config.sequence_parallel \
        else []
    if gemm is None:
        logits = logit_forward_flops(model, b) / t / flops_per_s
        logits_back = 2 * logits
    else:
        logits = _gemm_s(gemm, [logit_gemm(model, b, t)])
        logits_back = _gemm_s(gemm, logit_gemm(model, b, t).backward())
    out: list[Chunk] = []
    for j in range(k):
        fwd: list[Op] = (gather if j > 0 else []) + layer_fwd * per_chunk
        bwd: list[Op] = list(layer_bwd * per_chunk)
        params = per_chunk * layer_parameters(model) // t
        kept = per_chunk * stash
        if j == 0:
            if t > 1:  # the vocabulary-parallel embedding sums its slices (backward: identity)
                fwd.insert(0, ("reduce_scatter" if config.sequence_parallel else "all_reduce", n))
                if config.sequence_parallel:
                    bwd.append(("all_gather", n))
            params += model.vocab * model.hidden // t + model.seq * model.hidden
            kept += embedding_activation_bytes(model, b, t, config.sequence_parallel)
        if j == k - 1:  # final layer norm and the column-parallel output layer
            if config.sequence_parallel and t > 1:
                fwd.append(("all_gather", n))
            fwd.append(("compute", logits))
            head: list[Op] = [("compute", logits_back)]
            if t > 1:  # f: identity forward, all-reduce backward (ḡ's reverse with sp)
                head.append(("reduce_scatter" if config.sequence_parallel else "all_reduce", n))
            bwd = head + bwd
            if k > 1:
                params += model.vocab * model.hidden // t  # the tied output embedding
            kept += output_activation_bytes(model, b, t)
        else:
            bwd = gather + bwd  # the output gradient arrives as 1/t slices too
        out.append(Chunk(tuple(fwd), tuple(bwd), kept, transient, p2p if j > 0 else 0, p2p,
                         params))
    return out


def update_seconds(params: int, mem_bandwidth_Bps: float) -> float:
    """Adam's step over ``params`` parameters at the device's memory bandwidth, s."""
    return params * ADAM_BYTES_PER_PARAMETER / mem_bandwidth_Bps
