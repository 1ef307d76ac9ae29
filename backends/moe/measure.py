"""The rank programs of the expert-parallel twin's measurements (book chapter 22), spawned one
per process by :mod:`lab.moe` (``backends.launch.spawn``), and the layer and tokens they use.

* :class:`MoEConfig`, :func:`build`, :func:`group_tokens` — the layer (the same weights on
  every rank: one seed) and each rank's group of tokens (a seed per rank), so that a
  one-process profile can route exactly the tokens the ranks will;
* :func:`train_step` — one step of the layer: forward, the loss ``⟨y, g⟩ + α·aux`` with a
  fixed ``g`` and Switch's ``α = 10⁻²``, backward;
* :func:`time_step` — the real :class:`~backends.moe.parallel.ExpertParallelMoE` step on
  every rank at once: the slowest rank's seconds per step
  (:func:`backends.zero_measure.slowest_rank_times`), plus what this rank kept and dropped;
* :func:`profile_costs` — a profile on ONE process (world 1, every expert local, nothing to
  exchange): each rank's own work in the step besides its experts — the same layer's code on
  that rank's group with every expert an identity — and its experts' forward and backward on
  the rows they will get at world ``p`` (a line in the rows fitted to a few timings), s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from backends.device import device, on_device
from backends.measure import median_time
from backends.moe.layer import MoE
from backends.moe.parallel import ExpertParallelMoE
from backends.zero_measure import slowest_rank_times

AUX_WEIGHT = 1e-2
"""Switch's α, the weight of the auxiliary loss (Fedus et al. 2022 §2.2)."""


@dataclass(frozen=True)
class MoEConfig:
    """The layer of a measurement: widths, experts, ``k``, capacity factor, router skew (logit
    units, :func:`~backends.moe.layer.skew_bias`) and seed."""

    d_model: int = 64
    hidden: int = 128
    experts: int = 8
    k: int = 2
    capacity_factor: float = 1.25
    skew: float = 0.0
    seed: int = 0


def build(config: MoEConfig) -> MoE:
    """The one-process layer of ``config`` (the same weights wherever it is built)."""
    torch.manual_seed(config.seed)
    return MoE(config.d_model, config.hidden, config.experts, config.k,
               config.capacity_factor, config.skew)


def group_tokens(config: MoEConfig, rank: int, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s group: ``tokens`` rows of width ``d`` and the fixed gradient ``g`` of
    the loss with respect to the layer's output (CPU tensors)."""
    gen = torch.Generator().manual_seed(1_000 * (config.seed + 1) + rank)
    x = torch.randn(tokens, config.d_model, generator=gen)
    return x, torch.randn(tokens, config.d_model, generator=gen)


def train_step(layer: nn.Module, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Forward, ``⟨y, g⟩ + α·aux``, backward; returns the output ``y`` (detached)."""
    y, aux = layer(x)
    ((y * g).sum() + AUX_WEIGHT * aux).backward()
    out: torch.Tensor = y.detach()
    return out


def _step(layer: nn.Module, x: torch.Tensor, g: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        for param in layer.parameters():
            param.grad = None
        train_step(layer, x, g)
    return step


def time_step(config: MoEConfig, tokens: int, repeats: int) -> dict[str, object]:
    """Rank program: the expert-parallel step on this rank's group of ``tokens``, timed
    ``repeats`` times; the slowest rank's seconds of each, and this rank's kept assignments
    per expert (``counts``) and assignments dropped, as its router decided them."""
    import torch.distributed as dist

    rank = dist.get_rank()
    layer = on_device(ExpertParallelMoE(build(config)))
    x, g = (t.to(device()) for t in group_tokens(config, rank, tokens))
    routing = layer.route(x)
    samples = slowest_rank_times(_step(layer, x, g), repeats)
    return {"samples_s": samples, "dropped": routing.dropped,
            "counts": [int(n) for n in routing.counts()]}


def _forward_backward_s(fn: Callable[[], torch.Tensor], repeats: int) -> tuple[float, float]:
    """Median seconds of ``fn()`` (the forward), and of the backward of its sum."""
    def step() -> None:
        fn().sum().backward()  # type: ignore[no-untyped-call]

    forward = median_time(fn, repeats)
    return forward, max(median_time(step, repeats) - forward, 0.0)


def _line(sizes: list[int], seconds: list[float]) -> tuple[float, float]:
    """Least-squares ``a + b·rows`` through ``(sizes, seconds)`` (a line through the origin
    when there is one size), never below zero."""
    n = len(sizes)
    mean_x, mean_y = sum(sizes) / n, sum(seconds) / n
    spread = sum((x - mean_x) ** 2 for x in sizes)
    if spread == 0:
        return 0.0, mean_y / max(mean_x, 1)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(sizes, seconds, strict=True)) / spread
    return max(mean_y - slope * mean_x, 0.0), max(slope, 0.0)


def expert_lines(config: MoEConfig, rows: Sequence[int], repeats: int
                 ) -> tuple[tuple[float, float], tuple[float, float]]:
    """One expert's forward and backward seconds as lines ``a + b·rows``, fitted to timings
    at up to four row counts spread over ``rows`` (smallest, largest, two between)."""
    expert = build(config).experts[0].to(device())
    distinct = sorted(set(rows))
    sizes = sorted({distinct[round(i * (len(distinct) - 1) / 3)] for i in range(4)})
    timed = []
    for n in sizes:
        x = torch.randn(n, config.d_model, device=device())
        timed.append(_forward_backward_s(partial(expert, x), repeats))
    return (_line(sizes, [f for f, _ in timed]), _line(sizes, [b for _, b in timed]))


def profile_costs(config: MoEConfig, world: int, tokens: int,
                  counts: Sequence[Sequence[int]], repeats: int = 10) -> list[dict[str, float]]:
    """Rank program for ONE process: each of ``world`` ranks' one-core seconds for the routing
    histogram ``counts`` (``counts[s][e]``): ``forward_s``/``backward_s``, the layer's own work
    on group ``s`` (the expert-parallel layer at world 1 with every expert an identity: the
    routing, the exchanges' copies, the regrouping, the combine), and
    ``experts_forward_s``/``experts_backward_s``, rank ``s``'s ``E/world`` experts on the rows
    they get from every group (:func:`expert_lines`)."""
    bare = ExpertParallelMoE(build(config))
    bare.experts = nn.ModuleList(nn.Identity() for _ in range(config.experts))
    on_device(bare)
    m = config.experts // world
    got = [sum(row[e] for row in counts) for e in range(config.experts)]
    (fa, fb), (ba, bb) = expert_lines(config, [n for n in got if n], repeats)

    def output(x: torch.Tensor) -> torch.Tensor:
        y, aux = bare(x)
        out: torch.Tensor = y.sum() + aux
        return out

    costs = []
    for rank in range(world):
        x = group_tokens(config, rank, tokens)[0].to(device())
        forward, backward = _forward_backward_s(partial(output, x), repeats)
        mine = got[rank * m:(rank + 1) * m]
        costs.append({"forward_s": forward, "backward_s": backward,
                      "experts_forward_s": sum(fa + fb * n for n in mine if n),
                      "experts_backward_s": sum(ba + bb * n for n in mine if n)})
    return costs
