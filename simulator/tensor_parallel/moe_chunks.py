"""What one rank does per micro-batch when the grid has context or expert parallelism, or the
model has experts: :func:`moe_chunks`, the counterpart of
:func:`~simulator.tensor_parallel.chunks.dense_chunks` for a :class:`~simulator.moe_model.MoEGPT`
(a dense GPT is read as one, :func:`~simulator.moe_model.as_moe`).

On a rank of tensor group ``t``, context group ``cp`` and expert group ``ep``, one layer of a
micro-batch of ``b`` sequences is:

* **attention** on the rank's ``s/cp`` tokens: the projections' GEMMs ``(b·s/cp) × out/t ×
  in`` (every matrix split ``t`` ways — MLA's small down-projections, which Megatron-Core
  keeps whole, included: an approximation), its queries against all ``s`` keys; with
  ``cp > 1`` the keys and values go round the context ring (Liu et al., "Ring Attention",
  2023; Megatron-Core's context parallelism): ``cp − 1`` passes of one K/V block
  ``M = 2·b·(s/cp)·w_kv/t`` fp16 values forward, twice that backward (keys and values
  again, then their gradients): ``3·(cp−1)·M`` a layer, one block short of
  :func:`simulator.context_parallel.ring_traffic_bytes`'s ``(3cp−2)·M``, whose last
  gradient block also travels home; not overlapped with the attention compute (an upper
  bound);
* **MLP**: dense, or the router ``h → E`` and the experts: the ``T = b·s/cp`` tokens, each
  sent to ``k`` experts, go all-to-all over the expert group (dispatch), the rank's ``E/ep``
  local experts run a batched GEMM on ``ep·T·k/E`` rows each (balanced routing), the results
  go back (combine); backward repeats both exchanges
  (:func:`~simulator.moe_model.all_to_all_bytes_per_layer`). Experts are tensor-split like
  the dense MLP (expert tensor size ``t``), so the tensor group's collectives are unchanged;
  each tensor rank dispatches its ``1/t`` of the tokens (Megatron-Core splits them along the
  sequence before the dispatch), so a rank's all-to-all carries ``T·k·h/t`` values.

Activations per layer: :func:`~simulator.moe_model.activation_bytes_per_layer`. The first
chunk holds the word embedding, the last the final norm and the output layer (a tied one
as a copy on the last stage, as :func:`~simulator.tensor_parallel.chunks.dense_chunks` has it).
"""

from __future__ import annotations

import math
from dataclasses import replace

from simulator.core.gemm import Gemm, GemmModel
from simulator.moe_model import (
    activation_bytes_per_layer,
    as_moe,
    attention_matrices,
    attention_parameters,
    expert_parameters,
    layer_parameters,
    mlp_matrices,
)
from simulator.tensor_parallel.chunks import Chunk, Op, _backward, _gemm_s
from simulator.tensor_parallel.config import MegatronConfig
from simulator.transformer import FP16, embedding_activation_bytes, output_activation_bytes


def _projections(rows: int, matrices: list[tuple[int, int]], t: int, batch: int = 1
                 ) -> list[Gemm]:
    return [Gemm(rows, max(1, o // t), i, batch) if o >= i else
            Gemm(rows, o, max(1, i // t), batch) for i, o in matrices]


def layer_gemms(config: MegatronConfig, moe: bool) -> tuple[list[Gemm], list[Gemm]]:
    """One layer's forward GEMMs on a rank: attention's, then the MLP's (router included)."""
    m, g, b = as_moe(config.model), config.grid, config.micro_batch
    rows = b * m.seq // g.cp
    t = g.t
    heads = max(1, b * m.heads // t)
    qk = m.d_head + m.rope_dim
    attention = [*_projections(rows, attention_matrices(m), t),
                 Gemm(m.seq // g.cp, m.seq, qk, heads), Gemm(m.seq // g.cp, m.d_head, m.seq, heads)]
    if not moe:
        return attention, _projections(rows, mlp_matrices(m, m.mlp_width), t)
    local = m.experts // g.ep
    per_expert = max(1, math.ceil(g.ep * rows * m.top_k / m.experts))
    mlp = [Gemm(rows, m.experts, m.hidden),
           *_projections(per_expert, mlp_matrices(m, m.expert_width), t, local)]
    if m.shared_experts:
        mlp += _projections(rows, mlp_matrices(m, m.shared_experts * m.expert_width), t)
    return attention, mlp


def kv_block_bytes(config: MegatronConfig) -> float:
    """One rank's K/V block for one micro-batch, bytes: ``2·b·(s/cp)·w/t`` fp16 values, ``w``
    the key plus value width (MLA's decompressed heads, as Megatron-Core passes them)."""
    m, g = as_moe(config.model), config.grid
    if m.kv_rank:
        width = m.heads * (2 * m.d_head + m.rope_dim)
    else:
        width = 2 * (m.kv_heads or m.heads) * m.d_head
    return FP16 * config.micro_batch * m.seq / g.cp * width / g.t


def _layer_ops(config: MegatronConfig, moe: bool, flops_per_s: float, bandwidth_Bps: float,
               gemm: GemmModel | None) -> tuple[list[Op], list[Op]]:
    m, g, b = as_moe(config.model), config.grid, config.micro_batch
    rows = b * m.seq // g.cp
    n = FP16 * rows * m.hidden
    elementwise_s = 22 * rows * m.hidden / bandwidth_Bps  # the two blocks' sbh kernels

    def block(gemms: list[Gemm]) -> tuple[Op, Op]:
        if gemm is None:
            fwd = math.fsum(x.flops for x in gemms) / flops_per_s + elementwise_s / 2
            return ("compute", fwd), ("compute", 2 * fwd)
        return (("compute", _gemm_s(gemm, gemms) + elementwise_s / 2),
                ("compute", _gemm_s(gemm, _backward(gemms)) + elementwise_s))

    att_gemms, mlp_gemms = layer_gemms(config, moe)
    attention, attention_back = block(att_gemms)
    mlp, mlp_back = block(mlp_gemms)
    ring: list[Op] = [("cp_ring", kv_block_bytes(config))] if g.cp > 1 else []
    a2a: list[Op] = [("all_to_all", n * m.top_k / g.t)] if moe and g.ep > 1 else []
    tensor: list[Op] = [("all_reduce", n)] if g.t > 1 else []
    forward = [*ring, attention, *tensor, *a2a, mlp, *a2a, *tensor]
    backward_mlp = [*a2a, mlp_back, *a2a, *tensor]
    backward_attention = [*ring, *ring, attention_back, *tensor]
    again = {"full": list(forward), "none": [],
             "selective": [block(att_gemms[-2:])[0]]}[config.recompute]
    return forward, again + backward_mlp + backward_attention


def moe_chunks(config: MegatronConfig, flops_per_s: float, mem_bandwidth_Bps: float = math.inf,
               gemm: GemmModel | None = None) -> list[Chunk]:
    """The ``p·v`` virtual stages in pipeline order, as one rank runs them (module docstring);
    the dense layers first, as the model's ``dense_layers`` are."""
    m, g, b = as_moe(config.model), config.grid, config.micro_batch
    if config.sequence_parallel and g.t > 1:
        raise ValueError("sequence parallelism with context or expert parallelism is not "
                         "modelled; use one or the other")
    k = config.chunks
    per_chunk = m.layers // k
    rows = b * m.seq // g.cp
    n = FP16 * rows * m.hidden
    kinds = (False, True) if m.experts else (False,)
    ops = {moe: _layer_ops(config, moe, flops_per_s, mem_bandwidth_Bps, gemm) for moe in kinds}
    stash = {moe: activation_bytes_per_layer(m, b, moe, g.t, g.cp, False, config.recompute)
             for moe in kinds}
    transient = {moe: 0.0 if config.recompute == "none" else
                 activation_bytes_per_layer(m, b, moe, g.t, g.cp) - stash[moe]
                 for moe in kinds}
    dense_mlp = layer_parameters(m, False) - attention_parameters(m) - m.hidden
    logit = Gemm(rows, -(-m.vocab // g.t), m.hidden)
    logits = (logit.flops / flops_per_s, 2 * logit.flops / flops_per_s) if gemm is None \
        else (_gemm_s(gemm, [logit]), _gemm_s(gemm, logit.backward()))
    short = replace(m, seq=m.seq // g.cp)
    tensor: list[Op] = [("all_reduce", n)] if g.t > 1 else []
    out: list[Chunk] = []
    for j in range(k):
        fwd: list[Op] = []
        bwd: list[Op] = []
        kept = transient_bytes = 0.0
        params = experts = 0
        for layer in range(j * per_chunk, (j + 1) * per_chunk):
            moe = m.experts > 0 and layer >= m.dense_layers
            fwd += ops[moe][0]
            bwd = ops[moe][1] + bwd
            kept += stash[moe]
            transient_bytes = max(transient_bytes, transient[moe])
            if moe:
                mine = m.experts // g.ep * expert_parameters(m)
                experts += mine // g.t
                params += (attention_parameters(m) + m.hidden * (m.experts + 1)
                           + m.shared_experts * expert_parameters(m)) // g.t + mine // g.t
            else:
                params += (attention_parameters(m) + dense_mlp + m.hidden) // g.t
        if j == 0:
            fwd = tensor + fwd
            params += m.vocab * m.hidden // g.t
            kept += embedding_activation_bytes(short, b)
        if j == k - 1:
            fwd.append(("compute", logits[0]))
            bwd = [("compute", logits[1]), *tensor, *bwd]
            params += m.hidden + (0 if m.tied and k == 1 else m.vocab * m.hidden // g.t)
            kept += output_activation_bytes(short, b, g.t)
        p2p = int(n // g.t)
        out.append(Chunk(tuple(fwd), tuple(bwd), kept, transient_bytes, p2p if j > 0 else 0,
                         p2p, params, experts))
    return out
