"""A mixture-of-experts layer in one process: router, top-k gating, capacity, dropped tokens and
the auxiliary load-balancing loss (book chapter 22).

A *mixture of experts* (Shazeer et al. 2017) replaces one feed-forward block by ``E`` of them,
the *experts*, and a *router* that sends each token to ``k`` of them. For a group of ``T``
tokens ``x`` (rows of width ``d``):

* **router** — ``logits = x·W_rᵀ + b`` (``W_r`` is ``E × d``; ``b`` a fixed bias, zero unless
  routing is skewed on purpose, :func:`skew_bias`), ``probs = softmax(logits)``;
* **top-k gating** — each token picks the ``k`` experts of largest probability. Its gate
  weights are those probabilities: raw for ``k = 1`` (Switch, Fedus et al. 2022 §2.1),
  renormalised to sum to one for ``k ≥ 2`` (GShard, Lepikhin et al. 2021 §2.2);
* **capacity** — an expert takes at most ``C = ⌈capacity_factor · T · k / E⌉`` tokens of the
  group (:func:`capacity`; Switch §2.2, GShard §2.2). Assignments are counted in a fixed
  order — every token's first choice in token order, then every second choice, and so on
  (GShard's Algorithm 1: second choices only get what first choices left) — and an
  assignment whose position at its expert is ``≥ C`` is *dropped*: it contributes nothing,
  and a token whose every assignment was dropped leaves the layer as zeros (the residual
  connection around the layer carries it on);
* **experts** — small MLPs ``d → h → d`` (GELU); the output of token ``t`` is
  ``Σ_j gate[t, j] · expert_{e[t, j]}(x_t)`` over its kept assignments;
* **auxiliary load-balancing loss** — Switch eq. (4): ``E · Σ_i f_i · P_i`` with ``f_i`` the
  fraction of the group's tokens whose *first* choice is expert ``i`` and ``P_i`` the mean
  router probability of expert ``i`` (GShard §2.2 uses the same ``f_i`` with top-2). It is
  1 when routing is uniform and grows as it concentrates; the caller scales it (Switch uses
  ``α = 10⁻²``).

:func:`route` computes the whole assignment once, so that the one-process layer (:class:`MoE`)
and the expert-parallel one (:class:`backends.moe.parallel.ExpertParallelMoE`) drop exactly
the same tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


def capacity(tokens: int, experts: int, k: int, capacity_factor: float) -> int:
    """Tokens one expert takes from a group of ``tokens``: ``⌈cf · T · k / E⌉`` (Switch §2.2)."""
    return math.ceil(capacity_factor * tokens * k / experts)


def skew_bias(experts: int, strength: float) -> torch.Tensor:
    """A router bias that makes expert 0 more likely by ``strength`` in logit units (0: no
    skew): the knob that shows what unbalanced routing does to the all-to-all."""
    bias = torch.zeros(experts)
    bias[0] = strength
    return bias


@dataclass
class Routing:
    """Where a group's ``T`` tokens go: ``T × k`` assignments.

    Attributes:
        probs: router probabilities, ``T × E`` (differentiable).
        expert: chosen experts, ``T × k`` (int64), best first.
        gate: gate weights, ``T × k`` (differentiable).
        slot: each assignment's position at its expert in the counting order, ``T × k``.
        kept: ``slot < capacity``, ``T × k`` (bool): the assignments not dropped.
        capacity: ``C``, tokens per expert.
        aux_loss: Switch's load-balancing loss of the group (a differentiable scalar).
    """

    probs: torch.Tensor
    expert: torch.Tensor
    gate: torch.Tensor
    slot: torch.Tensor
    kept: torch.Tensor
    capacity: int
    aux_loss: torch.Tensor

    def order(self) -> torch.Tensor:
        """Flat indices (into the ``T·k`` assignments, ``t·k + j``) of the kept ones sorted by
        expert, then by slot: the order tokens are laid out in a dispatch buffer."""
        kept = self.kept.flatten().nonzero().squeeze(1)
        key = self.expert.flatten()[kept] * max(self.capacity, 1) + self.slot.flatten()[kept]
        return kept[torch.argsort(key)]

    def counts(self) -> torch.Tensor:
        """Kept assignments per expert, ``E`` (int64)."""
        experts = self.probs.shape[-1]
        return torch.bincount(self.expert[self.kept], minlength=experts)

    @property
    def dropped(self) -> int:
        """Assignments dropped for want of capacity."""
        return int((~self.kept).sum())


def route(x: torch.Tensor, router: nn.Linear, bias: torch.Tensor, k: int,
          capacity_factor: float) -> Routing:
    """Route the group ``x`` (``T × d``): top-``k`` gating, capacity, drops, auxiliary loss."""
    experts = router.out_features
    tokens = x.shape[0]
    probs = torch.softmax(router(x) + bias, dim=-1)
    top, expert = probs.topk(k, dim=-1)
    gate = top if k == 1 else top / top.sum(dim=-1, keepdim=True)
    # choice-major counting order: all first choices (by token), then all second choices ...
    onehot = nn.functional.one_hot(expert.t().reshape(-1), experts)  # (k·T) × E
    position = (onehot.cumsum(dim=0) * onehot).sum(dim=-1) - 1
    slot = position.view(k, tokens).t()
    cap = capacity(tokens, experts, k, capacity_factor)
    if tokens:
        first = nn.functional.one_hot(expert[:, 0], experts).to(probs.dtype).mean(dim=0)
        aux = experts * (first * probs.mean(dim=0)).sum()
    else:
        aux = probs.sum() * 0.0
    return Routing(probs, expert, gate, slot, slot < cap, cap, aux)


def expert_mlp(d_model: int, hidden: int) -> nn.Sequential:
    """One expert: ``d → h → d`` with a GELU between."""
    return nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, d_model))


def run_experts(experts: nn.ModuleList, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """Each expert on its block of ``rows`` (``counts[i]`` consecutive rows for expert ``i``),
    outputs in the same layout."""
    blocks = torch.split(rows, counts)
    return torch.cat([expert(block) for expert, block in zip(experts, blocks, strict=True)])


def combine(out: torch.Tensor, order: torch.Tensor, routing: Routing, tokens: int
            ) -> torch.Tensor:
    """Token outputs from expert outputs laid out in ``order``: each weighted by its gate and
    added to its token's row (``T × d``)."""
    k = routing.expert.shape[1]
    weights = routing.gate.flatten()[order].unsqueeze(1)
    y = out.new_zeros((tokens, out.shape[1]))
    return y.index_add(0, order // k, out * weights)


class MoE(nn.Module):
    """The mixture-of-experts layer on one process: ``forward(x)`` of a group ``x`` (``T × d``)
    returns ``(y, aux_loss)``."""

    bias: torch.Tensor
    """The router's fixed bias, ``E`` (logits; :func:`skew_bias`)."""

    def __init__(self, d_model: int, hidden: int, experts: int, k: int = 1,
                 capacity_factor: float = 1.25, skew: float = 0.0) -> None:
        super().__init__()
        if not 1 <= k <= experts:
            raise ValueError(f"k must be in 1..{experts}, got {k}")
        if capacity_factor <= 0:
            raise ValueError(f"the capacity factor must be > 0, got {capacity_factor}")
        self.d_model, self.hidden, self.num_experts = d_model, hidden, experts
        self.k, self.capacity_factor = k, capacity_factor
        self.router = nn.Linear(d_model, experts, bias=False)
        self.register_buffer("bias", skew_bias(experts, skew))
        self.experts = nn.ModuleList(expert_mlp(d_model, hidden) for _ in range(experts))

    def route(self, x: torch.Tensor) -> Routing:
        """The group's :class:`Routing`."""
        return route(x, self.router, self.bias, self.k, self.capacity_factor)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        routing = self.route(x)
        order = routing.order()
        rows = x[order // self.k]
        out = run_experts(self.experts, rows, routing.counts().tolist())
        return combine(out, order, routing, x.shape[0]), routing.aux_loss
