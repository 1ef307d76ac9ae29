"""A mixture-of-experts GPT as a workload: parameters (total and active), FLOPs, activation
bytes and all-to-all traffic per layer.

A :class:`MoEGPT` is a :class:`~simulator.transformer.GPT` whose MLP, in every layer after the
first ``dense_layers``, is ``E`` routed experts (each token goes to ``top_k`` of them, chosen
by a router ``h → E``) plus ``shared_experts`` that every token visits (Shazeer et al. 2017;
Fedus et al. 2022; DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, §2.1.2). Each expert
is a gated (SwiGLU) MLP ``h → f → h`` of three matrices (Shazeer 2020), ``3·h·f`` weights.
Attention is grouped-query (Ainslie et al. 2023: ``kv_heads`` key/value heads shared by the
``heads`` query heads) or, with ``kv_rank > 0``, multi-head latent attention (MLA,
DeepSeek-V2 §2.1: queries through a rank-``q_rank`` bottleneck, keys and values through a
rank-``kv_rank`` latent plus a ``rope_dim`` rotary key). Positions are rotary (no position
embedding); the output layer is not tied to the word embedding (``tied``: it is). Norms
are RMSNorm (``h`` weights, no bias); there are no biases.

**Parameters** sum the matrices of :func:`attention_matrices` and :func:`mlp_matrices`:
*total* counts every expert, *active* only ``top_k`` routed and the shared ones (what one
token touches; both embeddings counted). **FLOPs**: ``2`` per weight per token for the
projections, plus the attention core ``2·b·s²·a·(d_qk + d_v)`` (the whole ``s × s``
square, as :mod:`simulator.transformer` counts it). **All-to-all** (Lepikhin et al. 2021
§2.2; Rajbhandari et al. 2022 §5): per MoE layer a token's hidden state goes to its
``k`` experts and comes back — two all-to-alls forward (dispatch, combine) and two
backward, each rank sending ``T·k·h·bytes·(ep−1)/ep`` of its ``T`` tokens' ``T·k·h``
elements (balanced routing, no capacity drop: :func:`all_to_all_bytes_per_layer`).

A dense GPT with ``ffn = 4h``, ``gated = False``, ``experts = 0``, ``tied`` is the same
layer as :mod:`simulator.transformer`'s, up to biases and the position embedding
(:func:`as_moe`: how context parallelism sees a dense GPT).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator import transformer
from simulator.transformer import FP16, GPT, Recompute


@dataclass(frozen=True)
class MoEGPT(GPT):
    """A GPT with grouped-query or latent attention and mixture-of-experts MLPs.

    Attributes (beyond :class:`~simulator.transformer.GPT`'s):
        kv_heads: key/value heads (0: as many as ``heads``).
        head_dim: per-head width (0: ``hidden/heads``).
        ffn: the dense layers' MLP width ``f`` (0: ``4h``).
        gated: SwiGLU MLPs (three matrices) rather than ``h → f → h`` with GeLU (two).
        experts: routed experts ``E`` per MoE layer (0: every layer dense).
        top_k: experts each token is routed to.
        expert_ffn: each expert's width (0: ``ffn``).
        shared_experts: experts every token visits, of width ``expert_ffn``.
        dense_layers: the first layers whose MLP is dense.
        q_rank, kv_rank, rope_dim: MLA's query and key/value ranks and rotary key width
            (``kv_rank = 0``: grouped-query attention).
        tied: the output layer shares the word embedding (GPT-2/3 style).
    """

    kv_heads: int = 0
    head_dim: int = 0
    ffn: int = 0
    gated: bool = True
    experts: int = 0
    top_k: int = 1
    expert_ffn: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    q_rank: int = 0
    kv_rank: int = 0
    rope_dim: int = 0
    tied: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.experts and not 1 <= self.top_k <= self.experts:
            raise ValueError(f"top-k {self.top_k} must be between 1 and the {self.experts} "
                             "experts")
        if self.kv_heads and self.heads % self.kv_heads:
            raise ValueError(f"{self.heads} heads do not share {self.kv_heads} KV heads")
        if not 0 <= self.dense_layers <= self.layers:
            raise ValueError(f"dense layers {self.dense_layers} not in 0..{self.layers}")

    @property
    def d_head(self) -> int:
        """Per-head width of values (and of keys, without the rotary part)."""
        return self.head_dim or self.hidden // self.heads

    @property
    def mlp_width(self) -> int:
        """The dense MLP's width ``f``."""
        return self.ffn or 4 * self.hidden

    @property
    def expert_width(self) -> int:
        """One expert's width."""
        return self.expert_ffn or self.mlp_width

    @property
    def moe_layers(self) -> int:
        """Layers with experts."""
        return self.layers - self.dense_layers if self.experts else 0


PRESETS: dict[str, MoEGPT] = {
    # Jiang et al., "Mixtral of Experts", 2024, Table 1 (s = 4096 here; trained up to 32k).
    "mixtral-8x7b": MoEGPT(32, 4096, 32, 4096, 32000, "mixtral-8x7b", kv_heads=8,
                           head_dim=128, ffn=14336, experts=8, top_k=2),
    # DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, §4.2 (the main model, without the
    # multi-token-prediction module).
    "deepseek-v3": MoEGPT(61, 7168, 128, 4096, 129280, "deepseek-v3", head_dim=128,
                          ffn=18432, experts=256, top_k=8, expert_ffn=2048, shared_experts=1,
                          dense_layers=3, q_rank=1536, kv_rank=512, rope_dim=64),
}
"""MoE presets by name, from the papers (Mixtral: 46.7B total, 12.9B active; DeepSeek-V3:
671B total, 37B active)."""


def as_moe(model: GPT) -> MoEGPT:
    """``model`` as a :class:`MoEGPT` (a dense GPT: MHA, ``4h`` GeLU MLP, no experts)."""
    if isinstance(model, MoEGPT):
        return model
    return MoEGPT(model.layers, model.hidden, model.heads, model.seq, model.vocab, model.name,
                  gated=False, tied=True)


# ---- shapes ----------------------------------------------------------------------------------

def attention_matrices(m: MoEGPT) -> list[tuple[int, int]]:
    """The attention block's weight matrices as ``(in, out)``: GQA's ``Q, K, V, O``, or MLA's
    query down/up, key-value down (with the rotary key) and up, and output projection."""
    h, a, d = m.hidden, m.heads, m.d_head
    if m.kv_rank:
        q = [(h, m.q_rank), (m.q_rank, a * (d + m.rope_dim))] if m.q_rank else \
            [(h, a * (d + m.rope_dim))]
        return [*q, (h, m.kv_rank + m.rope_dim), (m.kv_rank, 2 * a * d), (a * d, h)]
    kv = (m.kv_heads or a) * d
    return [(h, a * d), (h, kv), (h, kv), (a * d, h)]


def mlp_matrices(m: MoEGPT, width: int) -> list[tuple[int, int]]:
    """One MLP of ``width``: gate, up, down (gated) or up, down."""
    h = m.hidden
    return [(h, width)] * (2 if m.gated else 1) + [(width, h)]


def _weights(matrices: list[tuple[int, int]]) -> int:
    return sum(i * o for i, o in matrices)


def attention_parameters(m: MoEGPT) -> int:
    """One layer's attention weights, plus its norm (and MLA's two latent norms)."""
    norms = m.hidden + (m.q_rank + m.kv_rank if m.kv_rank else 0)
    return _weights(attention_matrices(m)) + norms


def expert_parameters(m: MoEGPT) -> int:
    """One routed expert's weights."""
    return _weights(mlp_matrices(m, m.expert_width))


def layer_parameters(m: MoEGPT, moe: bool, active: bool = False) -> int:
    """One layer (dense or MoE), every expert or (``active``) the ``k`` a token uses."""
    norm = m.hidden
    if not moe:
        return attention_parameters(m) + _weights(mlp_matrices(m, m.mlp_width)) + norm
    routed = m.top_k if active else m.experts
    return (attention_parameters(m) + norm + m.hidden * m.experts
            + (routed + m.shared_experts) * expert_parameters(m))


def parameters(m: GPT, active: bool = False) -> int:
    """All parameters (or the active ones): layers, the word embedding, the output layer and
    the final norm. A plain GPT: :func:`simulator.transformer.parameters`."""
    if not isinstance(m, MoEGPT):
        return transformer.parameters(m)
    layers = (m.layers - m.moe_layers) * layer_parameters(m, False) \
        + m.moe_layers * layer_parameters(m, True, active)
    return layers + (1 if m.tied else 2) * m.vocab * m.hidden + m.hidden


# ---- FLOPs -----------------------------------------------------------------------------------

def attention_core_flops(m: MoEGPT, b: int) -> float:
    """Scores and their product with the values, ``2·b·s²·a·(d_qk + d_v)``."""
    return 2 * b * m.seq ** 2 * m.heads * (2 * m.d_head + m.rope_dim)


def layer_forward_flops(m: MoEGPT, b: int, moe: bool) -> float:
    """One layer's forward on ``b`` sequences: ``2`` FLOPs per active weight per token, plus
    the attention core."""
    return 2 * b * m.seq * layer_parameters(m, moe, active=True) + attention_core_flops(m, b)


def iteration_flops(model: GPT, batch: int, recompute: Recompute = "full") -> float:
    """FLOPs of one iteration (backward twice the forward; ``full`` recomputes every layer's
    forward, ``selective`` its attention core); the output layer ``2·b·s·h·V`` forward. A
    plain GPT: :func:`simulator.transformer.iteration_flops`."""
    if not isinstance(model, MoEGPT):
        return transformer.iteration_flops(model, batch, recompute)
    m = model
    total = 0.0
    for moe, count in ((False, m.layers - m.moe_layers), (True, m.moe_layers)):
        fwd = layer_forward_flops(m, batch, moe)
        again = {"none": 0.0, "selective": attention_core_flops(m, batch), "full": fwd}
        total += count * (3 * fwd + again[recompute])
    return total + 3 * 2 * batch * m.seq * m.hidden * m.vocab


# ---- activations and traffic -----------------------------------------------------------------

def activation_bytes_per_layer(m: MoEGPT, b: int, moe: bool, t: int = 1, cp: int = 1,
                               sequence_parallel: bool = False,
                               recompute: Recompute = "none") -> float:
    """Bytes one layer keeps per micro-batch on a rank, after Korthikanti et al. 2022's count
    (Table 2) with the sequence split ``cp`` ways (each rank keeps its ``s/cp`` tokens; its
    queries meet all ``s`` keys, so the score term is ``5·a·(s/cp)·s·b/t``).

    Attention ``(s/cp)·b·h·(5 + 8/t)`` (MHA-sized ``K, V``: an upper bound for GQA/MLA);
    MLP ``5h`` per token, plus per MLP a token visits its input (``2h``, the dispatched copy,
    MoE only) and ``2·f/t`` per matrix output of width ``f`` (gate, up and their product:
    ``6f/t``; ``4f/t`` ungated — Korthikanti's ``16h/t`` at ``f = 4h``); the router's fp32
    logits ``4E``. With sequence parallelism the unsplit terms are split ``t`` ways too;
    ``full`` keeps the layer's input ``2·(s/cp)·b·h``."""
    s_local = m.seq // cp
    sbh = s_local * b * m.hidden
    split = t if sequence_parallel else 1
    if recompute == "full":
        return 2 * sbh / split
    per_f = (6 if m.gated else 4) / t
    if moe:
        mlp = (m.top_k * (2 * m.hidden + per_f * m.expert_width)
               + m.shared_experts * per_f * m.expert_width + 4 * m.experts) * s_local * b
    else:
        mlp = per_f * m.mlp_width * s_local * b
    scores = 0.0 if recompute == "selective" else 5 * m.heads * s_local * m.seq * b / t
    return sbh * (10 / split + 8 / t) + mlp + scores


def all_to_all_bytes_per_layer(m: MoEGPT, tokens: int, ep: int, itemsize: int = FP16) -> float:
    """Bytes one rank sends in the four all-to-alls of one MoE layer (dispatch and combine,
    forward and backward) for its ``tokens``: ``4·T·k·h·itemsize·(ep−1)/ep`` (balanced
    routing; the ``1/ep`` whose expert is local stays home)."""
    return 4 * tokens * m.top_k * m.hidden * itemsize * (ep - 1) / ep
