"""A GPT as a workload: parameters, FLOPs, activation bytes and traffic, from the papers.

A GPT (decoder-only transformer) of ``l`` layers, hidden size ``h``, ``a`` attention heads,
sequence length ``s`` and vocabulary ``V`` is, per layer, a self-attention block (the QKV
projection ``h → 3h``, attention over ``a`` heads, the output projection ``h → h``) and an MLP
(``h → 4h → h``), each behind a layer norm. Everything the Megatron chapter (book chapter 12)
predicts follows from these five numbers and the micro-batch size ``b``:

* **Parameters** (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM", SC 2021, §5.1):
  ``P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h))`` — per layer ``12h² + 13h`` (weights and
  biases of four matrices, two layer norms), plus the word and position embeddings ``(V+s)·h``.
* **FLOPs** (same paper, appendix): a layer's forward multiplies matrices for
  ``24·b·s·h² + 4·b·s²·h`` FLOPs; backward costs twice the forward; the logit layer
  ``2·b·s·h·V`` forward. With full activation recomputation an iteration of batch ``B`` costs
  ``F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))``.
* **Activations** (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
  Models", 2022, Table 2), bytes per layer kept for the backward pass, fp16:

  =====================================================  ================================
  no parallelism                                         ``s·b·h·(34 + 5·a·s/h)``
  tensor parallel ``t``                                  ``s·b·h·(10 + 24/t + 5·a·s/(h·t))``
  tensor + sequence parallel                             ``s·b·h·(34/t + 5·a·s/(h·t))``
  tensor parallel + selective recomputation              ``s·b·h·(10 + 24/t)``
  tensor + sequence parallel + selective recomputation   ``s·b·h·34/t``
  full recomputation                                     ``2·s·b·h`` (the layer's input)
  =====================================================  ================================

* **GEMM shapes**: the same FLOPs as matrix multiplications of given shapes on one
  tensor-parallel rank (:func:`attention_gemms`, :func:`mlp_gemms`, :func:`logit_gemm`), for
  a GPU's time model by shape (:mod:`simulator.core.gemm`).
* **Memory-bound work**: layer norms, softmax, dropout, GeLU and residual additions do few
  FLOPs but move the activations through HBM; :func:`attention_elementwise_bytes` and
  :func:`mlp_elementwise_bytes` count those bytes (our count, kernel by kernel, over the
  tensors of Korthikanti et al.'s activation table).
* **Communication** per micro-batch: tensor parallelism all-reduces ``b·s·h`` elements twice
  in the forward and twice in the backward of each layer, so a ring sends
  ``8·b·s·h·(t−1)/t`` elements per rank and layer (Narayanan et al. §3.3); the pipeline sends
  ``b·s·h`` elements between stages (``b·s·h/t`` per rank with the scatter/gather
  optimisation, §4.1); data parallelism all-reduces each rank's gradients once per iteration.

Sizes are elements or bytes as named; FLOPs are floating-point operations (a multiply-add is
two). Nothing here knows about a cluster: :mod:`simulator.tensor_parallel` times it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from simulator.core.gemm import Gemm

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[Recompute, ...] = ("none", "selective", "full")
FP16 = 2
"""Bytes per element of activations, parameters and gradients in mixed precision."""


@dataclass(frozen=True)
class GPT:
    """A GPT's shape (Narayanan et al. 2021, Table 1 notation).

    Attributes:
        layers: ``l``, transformer layers.
        hidden: ``h``, the hidden size.
        heads: ``a``, attention heads (``h`` must divide by it).
        seq: ``s``, sequence length in tokens.
        vocab: ``V``, vocabulary size.
        name: a label.
    """

    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    name: str = "gpt"

    def __post_init__(self) -> None:
        for field in ("layers", "hidden", "heads", "seq", "vocab"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden size {self.hidden} does not split into {self.heads} heads")


PRESETS: dict[str, GPT] = {
    # Narayanan et al. SC 2021, Table 1 (s = 2048, V = 51200): the weak-scaling models.
    "gpt-1.7b": GPT(24, 2304, 24, 2048, 51200, "gpt-1.7b"),
    "gpt-3.6b": GPT(30, 3072, 32, 2048, 51200, "gpt-3.6b"),
    "gpt-7.5b": GPT(36, 4096, 32, 2048, 51200, "gpt-7.5b"),
    "gpt-18b": GPT(40, 6144, 48, 2048, 51200, "gpt-18b"),
    "gpt-39b": GPT(48, 8192, 64, 2048, 51200, "gpt-39b"),
    "gpt-76b": GPT(60, 10240, 80, 2048, 51200, "gpt-76b"),
    "gpt-145b": GPT(80, 12288, 96, 2048, 51200, "gpt-145b"),
    "gpt-310b": GPT(96, 16384, 128, 2048, 51200, "gpt-310b"),
    "gpt-530b": GPT(105, 20480, 128, 2048, 51200, "gpt-530b"),
    "gpt-1t": GPT(128, 25600, 160, 2048, 51200, "gpt-1t"),
    # GPT-3 175B (Brown et al. 2020, Table 2.1), as Korthikanti et al. 2022 train it.
    "gpt3-175b": GPT(96, 12288, 96, 2048, 51200, "gpt3-175b"),
    # Korthikanti et al. 2022, Table 3.
    "gpt-22b": GPT(48, 6144, 64, 2048, 51200, "gpt-22b"),
}
"""Model presets by name, from the papers' tables."""


def preset(name: str) -> GPT:
    """A model preset by name (a key of :data:`PRESETS`)."""
    if name not in PRESETS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


def _check(b: int, t: int = 1) -> None:
    if b < 1:
        raise ValueError(f"the micro-batch size must be at least 1, got {b}")
    if t < 1:
        raise ValueError(f"the tensor-parallel size must be at least 1, got {t}")


# ---- parameters --------------------------------------------------------------------------

def layer_parameters(model: GPT) -> int:
    """Parameters of one transformer layer: ``12h² + 13h``.

    QKV ``3h² + 3h``, output projection ``h² + h``, MLP ``4h² + 4h`` and ``4h² + h``, two layer
    norms ``2·2h``.
    """
    h = model.hidden
    return 12 * h * h + 13 * h


def embedding_parameters(model: GPT) -> int:
    """Word and position embeddings, ``(V + s)·h`` (the output layer shares the word
    embedding)."""
    return (model.vocab + model.seq) * model.hidden


def parameters(model: GPT) -> int:
    """All parameters, ``12·l·h² + 13·l·h + (V + s)·h`` — Narayanan et al.'s
    ``P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h))`` exactly (no final layer norm)."""
    return model.layers * layer_parameters(model) + embedding_parameters(model)


def parameters_formula(model: GPT) -> float:
    """Narayanan et al. 2021's closed form of :func:`parameters`, as printed."""
    n, h, s, v = model.layers, model.hidden, model.seq, model.vocab
    return 12 * n * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * n * h))


# ---- FLOPs -------------------------------------------------------------------------------

def attention_forward_flops(model: GPT, b: int) -> float:
    """Self-attention block forward, FLOPs: QKV ``6bsh²``, scores ``2bs²h``, their product
    with the values ``2bs²h``, output projection ``2bsh²`` — ``8bsh² + 4bs²h``."""
    s, h = model.seq, model.hidden
    return 8 * b * s * h * h + 4 * b * s * s * h


def attention_core_flops(model: GPT, b: int) -> float:
    """The part selective recomputation recomputes (Korthikanti et al. §5): ``QKᵀ``, softmax
    and the product with ``V``, ``4bs²h`` FLOPs."""
    return 4 * b * model.seq * model.seq * model.hidden


def mlp_forward_flops(model: GPT, b: int) -> float:
    """MLP forward, ``h → 4h → h``: ``16bsh²`` FLOPs."""
    return 16 * b * model.seq * model.hidden ** 2


def layer_forward_flops(model: GPT, b: int) -> float:
    """One layer's forward for a micro-batch of ``b`` sequences: ``24bsh² + 4bs²h`` FLOPs."""
    return attention_forward_flops(model, b) + mlp_forward_flops(model, b)


def layer_backward_flops(model: GPT, b: int) -> float:
    """One layer's backward: twice its forward (gradients of inputs and of weights)."""
    return 2 * layer_forward_flops(model, b)


def logit_forward_flops(model: GPT, b: int) -> float:
    """The output layer's forward (hidden states times the word embedding): ``2bshV``."""
    return 2 * b * model.seq * model.hidden * model.vocab


def recompute_flops(model: GPT, b: int, recompute: Recompute) -> float:
    """Extra forward FLOPs per layer and micro-batch that recomputation spends in the backward
    pass: the whole forward (full), the attention core (selective), or none."""
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(f"unknown recompute mode {recompute!r}; choose none, selective or full")
    return {"none": 0.0, "selective": attention_core_flops(model, b),
            "full": layer_forward_flops(model, b)}[recompute]


def iteration_flops(model: GPT, batch: int, recompute: Recompute = "full") -> float:
    """FLOPs of one iteration of ``batch`` sequences (matrix multiplications), counting the
    recomputation done: with ``full`` this is Narayanan et al.'s
    ``96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))``; with ``none`` the *model* FLOPs
    ``72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))`` (Korthikanti et al. §6.3)."""
    layer = 3 * layer_forward_flops(model, batch) + recompute_flops(model, batch, recompute)
    return model.layers * layer + 3 * logit_forward_flops(model, batch)


def iteration_flops_formula(model: GPT, batch: int) -> float:
    """Narayanan et al. 2021's closed form (full recomputation), as printed."""
    n, h, s, v = model.layers, model.hidden, model.seq, model.vocab
    return 96 * batch * s * n * h * h * (1 + s / (6 * h) + v / (16 * n * h))


def training_days(tokens: float, params: float, gpus: int, flops_per_gpu: float) -> float:
    """End-to-end training time, days: ``8·T·P/(n·X)`` (Narayanan et al. §5.1; ``T`` tokens,
    ``P`` parameters, ``n`` GPUs at ``X`` FLOP/s each, with recomputation)."""
    return 8 * tokens * params / (gpus * flops_per_gpu) / 86400


# ---- GEMM shapes ---------------------------------------------------------------------------

def attention_gemms(model: GPT, b: int, t: int = 1) -> tuple[Gemm, ...]:
    """The attention block's forward GEMMs on one tensor-parallel rank (Megatron's layout,
    ``b·s`` tokens as rows): QKV ``bs × 3h/t × h``; then per head (``b·a/t`` of them) the
    scores ``QKᵀ``, ``s × s × h/a``, and their product with the values, ``s × h/a × s``
    (:func:`attention_core_gemms`); the output projection ``bs × h × h/t``. Their FLOPs add
    up to :func:`attention_forward_flops` ``/t``."""
    _check(b, t)
    s, h = model.seq, model.hidden
    return (Gemm(b * s, 3 * h // t, h), *attention_core_gemms(model, b, t),
            Gemm(b * s, h, h // t))


def attention_core_gemms(model: GPT, b: int, t: int = 1) -> tuple[Gemm, Gemm]:
    """The two batched GEMMs of the attention core (what selective recomputation recomputes):
    ``QKᵀ`` and the product with ``V``, one per head on this rank."""
    _check(b, t)
    s, d, heads = model.seq, model.hidden // model.heads, b * model.heads // t
    return Gemm(s, s, d, heads), Gemm(s, d, s, heads)


def mlp_gemms(model: GPT, b: int, t: int = 1) -> tuple[Gemm, Gemm]:
    """The MLP's forward GEMMs on one rank: ``bs × 4h/t × h`` (column-parallel) and
    ``bs × h × 4h/t`` (row-parallel); ``16bsh²/t`` FLOPs."""
    _check(b, t)
    s, h = model.seq, model.hidden
    return Gemm(b * s, 4 * h // t, h), Gemm(b * s, h, 4 * h // t)


def logit_gemm(model: GPT, b: int, t: int = 1) -> Gemm:
    """The output layer on one rank, ``bs × V/t × h`` (vocabulary-parallel)."""
    _check(b, t)
    return Gemm(b * model.seq, -(-model.vocab // t), model.hidden)


# ---- memory-bound work -------------------------------------------------------------------

def attention_elementwise_bytes(model: GPT, b: int, t: int = 1,
                                sequence_parallel: bool = False) -> float:
    """HBM bytes the attention block's elementwise kernels move in the forward, per
    tensor-parallel rank (fp16, 1-byte masks; each kernel reads its inputs and writes its
    outputs once): layer norm ``4sbh``; the fused scale-mask-softmax ``4as²b/t`` and its
    dropout ``5as²b/t`` (read, write, mask); the fused bias-dropout-residual ``7sbh``. The
    ``sbh`` terms are split ``t`` ways with sequence parallelism. The same tensors as
    Korthikanti et al.'s activation count (§4.1), each touched by one kernel."""
    _check(b, t)
    s, h, a = model.seq, model.hidden, model.heads
    sbh = s * b * h / (t if sequence_parallel else 1)
    return 11 * sbh + 9 * a * s * s * b / t


def mlp_elementwise_bytes(model: GPT, b: int, t: int = 1,
                          sequence_parallel: bool = False) -> float:
    """HBM bytes of the MLP block's elementwise kernels in the forward, per tensor-parallel
    rank: layer norm ``4sbh``, the fused bias-GeLU on the ``4h``-wide slice ``16sbh/t``, the
    bias-dropout-residual ``7sbh`` (see :func:`attention_elementwise_bytes`)."""
    _check(b, t)
    s, h = model.seq, model.hidden
    sbh = s * b * h
    return 11 * sbh / (t if sequence_parallel else 1) + 16 * sbh / t


# ---- activation memory -------------------------------------------------------------------

def activation_bytes_per_layer(model: GPT, b: int, t: int = 1, sequence_parallel: bool = False,
                               recompute: Recompute = "none") -> float:
    """Bytes one layer keeps per micro-batch on each tensor-parallel rank (Korthikanti et al.
    2022, Table 2; fp16 activations, 1-byte dropout masks).

    ``none``: ``sbh·(10 + 24/t + 5as/(ht))``, or with sequence parallelism
    ``sbh·(34/t + 5as/(ht))``; ``selective`` drops the ``5as/(ht)`` attention term (softmax,
    its dropout mask and output, recomputed); ``full`` keeps only the layer's input,
    ``2sbh`` — ``2sbh/t`` with sequence parallelism, whose layer inputs are split along the
    sequence (our reading of §4.2.2: the stored input is the sequence-parallel shard).
    """
    _check(b, t)
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(f"unknown recompute mode {recompute!r}; choose none, selective or full")
    s, h, a = model.seq, model.hidden, model.heads
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (t if sequence_parallel else 1)
    attention = 0.0 if recompute == "selective" else 5 * a * s / (h * t)
    rest = 34 / t if sequence_parallel else 10 + 24 / t
    return sbh * (rest + attention)


def full_activation_bytes_per_layer(model: GPT, b: int, t: int = 1,
                                    sequence_parallel: bool = False) -> float:
    """What one layer holds while its backward runs after a recomputation: everything
    (:func:`activation_bytes_per_layer` with ``none``)."""
    return activation_bytes_per_layer(model, b, t, sequence_parallel, "none")


def embedding_activation_bytes(model: GPT, b: int, t: int = 1,
                               sequence_parallel: bool = False) -> float:
    """The embedding's dropout mask per micro-batch on the first stage, ``sbh`` bytes
    (``sbh/t`` with sequence parallelism) — Korthikanti et al. §4.3."""
    _check(b, t)
    return model.seq * b * model.hidden / (t if sequence_parallel else 1)


def output_activation_bytes(model: GPT, b: int, t: int = 1) -> float:
    """The final layer norm, output layer and cross entropy on the last stage,
    ``4sbh/t·(1 + V/h)`` bytes per micro-batch (Korthikanti et al. §4.3)."""
    _check(b, t)
    s, h = model.seq, model.hidden
    return 4 * s * b * h / t * (1 + model.vocab / h)


# ---- communication -----------------------------------------------------------------------

def tensor_parallel_elements_per_layer(model: GPT, b: int, t: int,
                                       recompute: Recompute = "none") -> float:
    """Elements each tensor-parallel rank sends per layer and micro-batch: four ring
    all-reduces of ``b·s·h`` elements (``g`` twice forward, ``f`` twice backward), each
    ``2·(t−1)/t·bsh`` — ``8·b·s·h·(t−1)/t`` (Narayanan et al. §3.3). Full recomputation runs
    the forward's two again: ``12·b·s·h·(t−1)/t``. Sequence parallelism replaces each
    all-reduce by an all-gather and a reduce-scatter: the same volume."""
    _check(b, t)
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(f"unknown recompute mode {recompute!r}; choose none, selective or full")
    all_reduces = 6 if recompute == "full" else 4
    return all_reduces * 2 * b * model.seq * model.hidden * (t - 1) / t


def pipeline_elements(model: GPT, b: int, t: int = 1, scatter_gather: bool = True) -> float:
    """Elements one rank sends to the next stage per micro-batch (and the gradient back):
    ``b·s·h``, or ``b·s·h/t`` with the scatter/gather optimisation (Narayanan et al. §4.1:
    each tensor-parallel rank sends its slice, the receivers all-gather over NVLink)."""
    _check(b, t)
    return b * model.seq * model.hidden / (t if scatter_gather else 1)
