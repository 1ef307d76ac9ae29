"""Expert parallelism simulated: one step of a mixture-of-experts layer whose experts are sharded
over ranks (book chapter 22; the twin of :mod:`backends.moe`).

Every rank routes its own group of ``T`` tokens to ``k`` of ``E`` experts; rank ``j`` holds
experts ``j·m … (j+1)·m − 1`` (``m = E/p``). The *routing histogram* ``counts[s][e]`` — the
assignments of rank ``s``'s group that expert ``e`` kept — fixes everything else:

* **capacity** ``C = ⌈cf · T · k / E⌉`` per expert per group (Switch, Fedus et al. 2022 §2.2;
  GShard, Lepikhin et al. 2021 §2.2): ``counts[s][e] ≤ C``, the rest of the demand is
  *dropped* (:func:`routing_histogram` builds an idealised histogram with a hot expert);
* **traffic** — rank ``s`` sends ``Σ_{e on j} counts[s][e] · d · itemsize`` bytes to rank
  ``j`` in each of the step's four uneven all-to-alls (:func:`exchange_bytes`): dispatch and
  combine forward, and their reverses in backward (DeepSpeed-MoE, Rajbhandari et al. 2022 §5);
  before the dispatch, the counts themselves (``p·m`` int64) go all-to-all;
* **compute** — a rank runs its own router and bookkeeping on its ``T`` tokens and its ``m``
  experts on every row they received: the busiest rank's experts set the pace.

:func:`moe_step` is the rank program of one training step, in the real twin's order (no
overlap): route, count exchange, dispatch, experts forward, combine; then the combine's
backward (a dispatch), experts backward, the dispatch's backward (a combine), the rest of
backward. :func:`uneven_all_to_all` is the twin of
:func:`backends.moe.exchange.all_to_all_uneven`: the pairwise schedule, empty pieces not sent.

**Closed forms** (α per message, β per byte). With uniform routing every piece has ``b``
bytes and the pairwise all-to-all costs ``(p−1)·(α + b·β)`` (:func:`balanced_all_to_all_cost`,
Thakur et al. 2005 §3.5). Skew does not change the number of messages but the bytes: the rank
that holds the hot expert receives ``Σ_s counts[s][hot]·d·itemsize`` — up to ``p·C`` rows for
that one expert (:func:`busiest_bytes`), and every rank sends that much more to it, one
step after another: the exchange takes at least ``max_r Σ_j (α + out[r][j]·β)``
(:func:`skewed_all_to_all_bound`). Seconds and bytes throughout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulator.collectives.all_to_all import pairwise_all_to_all
from simulator.core.comm import SimComm, SimGen, SimResult, SimWork, run_spmd
from simulator.core.cores import CorePool, spend
from simulator.core.hardware import Cluster

COUNT_BYTES = 8
"""Bytes of one count in the count exchange (int64)."""


def capacity(tokens: int, experts: int, k: int, capacity_factor: float) -> int:
    """Tokens an expert takes from one group: ``⌈cf · T · k / E⌉`` (Switch §2.2)."""
    return math.ceil(capacity_factor * tokens * k / experts)


def _spread(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` integers as evenly as possible, larger ones first."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def routing_histogram(tokens: int, experts: int, k: int, capacity_factor: float, world: int,
                      hot_fraction: float = 0.0) -> tuple[list[list[int]], int]:
    """An idealised histogram: in every group a fraction ``hot_fraction`` of the tokens choose
    expert 0 first, the other first choices and every later choice spread evenly over the
    experts; each expert keeps at most ``C``. Returns ``counts[s][e]`` (the same for every
    rank ``s``) and the assignments dropped per group."""
    if not 0.0 <= hot_fraction <= 1.0:
        raise ValueError(f"hot_fraction must be in [0, 1], got {hot_fraction}")
    hot = round(hot_fraction * tokens)
    demand = _spread(tokens - hot, experts)
    demand[0] += hot
    later = _spread((k - 1) * tokens, experts)
    demand = [a + b for a, b in zip(demand, later, strict=True)]
    cap = capacity(tokens, experts, k, capacity_factor)
    kept = [min(n, cap) for n in demand]
    return [list(kept) for _ in range(world)], sum(demand) - sum(kept)


def exchange_bytes(counts: Sequence[Sequence[int]], d_model: int, itemsize: int = 4
                   ) -> list[list[int]]:
    """``out[s][j]``: bytes rank ``s`` sends rank ``j`` in a dispatch (the rows for ``j``'s
    experts); a combine sends ``out[j][s]`` back."""
    p, experts = len(counts), len(counts[0])
    if experts % p:
        raise ValueError(f"{experts} experts cannot be sharded over {p} ranks")
    m = experts // p
    return [[sum(row[j * m:(j + 1) * m]) * d_model * itemsize for j in range(p)]
            for row in counts]


def busiest_bytes(out: Sequence[Sequence[int]]) -> int:
    """The most bytes any rank sends to or receives from other ranks in one exchange."""
    p = len(out)
    sent = [sum(out[r][j] for j in range(p) if j != r) for r in range(p)]
    got = [sum(out[s][r] for s in range(p) if s != r) for r in range(p)]
    return max(max(sent), max(got))


def balanced_all_to_all_cost(p: int, piece_bytes: float, alpha_s: float,
                             beta_s_per_B: float) -> float:
    """Pairwise all-to-all with every piece ``piece_bytes``: ``(p−1)·(α + b·β)`` s."""
    return (p - 1) * (alpha_s + piece_bytes * beta_s_per_B)


def skewed_all_to_all_bound(out: Sequence[Sequence[int]], alpha_s: float,
                            beta_s_per_B: float) -> float:
    """A lower bound of :func:`uneven_all_to_all` on α-β links: a rank's sends leave one step
    after another, so the exchange takes at least ``max_r Σ_j (α + out[r][j]·β)`` over the
    non-empty pieces ``j ≠ r``, s. With uniform routing it is the balanced closed form."""
    p = len(out)
    return max(sum(alpha_s + out[r][j] * beta_s_per_B for j in range(p)
                   if j != r and out[r][j]) for r in range(p))


def uneven_all_to_all(comm: SimComm, send_nbytes: Sequence[int], recv_nbytes: Sequence[int]
                      ) -> SimGen:
    """Pairwise all-to-all with pieces of any size: ``send_nbytes[j]`` to rank ``j``,
    ``recv_nbytes[j]`` from it; an empty piece is not sent."""
    p, r = comm.world_size, comm.rank
    for step in range(1, p):
        dst, src = ((r ^ step, r ^ step) if p & (p - 1) == 0
                    else ((r + step) % p, (r - step) % p))
        pending: list[SimWork] = []
        if recv_nbytes[src]:
            pending.append(comm.irecv(src, recv_nbytes[src]))
        if send_nbytes[dst]:
            pending.append(comm.isend(dst, send_nbytes[dst]))
        for work in pending:
            yield work.wait()


@dataclass(frozen=True)
class RankCost:
    """One rank's one-core seconds in a step, from a one-process profile.

    Attributes:
        forward_s: routing and the layer's bookkeeping in forward (router, top-k, capacity,
            gathering the rows, weighting and adding the outputs), s.
        backward_s: the same in backward, s.
        experts_forward_s: this rank's experts on the rows they received, forward, s.
        experts_backward_s: the same, backward, s.
    """

    forward_s: float
    backward_s: float
    experts_forward_s: float
    experts_backward_s: float


def moe_step(comm: SimComm, out: Sequence[Sequence[int]], costs: Sequence[RankCost],
             local_experts: int, shared: dict[str, Any]) -> SimGen:
    """Rank program of one expert-parallel training step (module docstring's order); compute
    runs on a pool of ``shared["cores"]`` cores shared by all ranks."""
    p, r = comm.world_size, comm.rank
    pool: CorePool | None = None
    if not math.isinf(shared["cores"]):
        pool = shared.setdefault("pool", CorePool(comm.env, shared["cores"]))
    send = list(out[r])
    recv = [out[s][r] for s in range(p)]
    cost = costs[r]

    def exchange(name: str, sends: list[int], recvs: list[int]) -> SimGen:
        start = comm.now
        yield from uneven_all_to_all(comm, sends, recvs)
        comm.span("step", name, start, sum(sends) - sends[r])

    yield from spend(comm, cost.forward_s, "route", pool)
    if p > 1:
        yield from pairwise_all_to_all(comm, p * local_experts * COUNT_BYTES, COUNT_BYTES)
    yield from exchange("dispatch", send, recv)
    yield from spend(comm, cost.experts_forward_s, "experts forward", pool)
    yield from exchange("combine", recv, send)
    yield from exchange("combine backward", send, recv)
    yield from spend(comm, cost.experts_backward_s, "experts backward", pool)
    yield from exchange("dispatch backward", recv, send)
    yield from spend(comm, cost.backward_s, "route backward", pool)


def simulate_moe_step(cluster: Cluster, counts: Sequence[Sequence[int]],
                      costs: Sequence[RankCost], d_model: int, itemsize: int = 4,
                      cores: float = math.inf, trace: bool = True) -> SimResult:
    """One expert-parallel step on ``cluster`` with routing histogram ``counts`` (``p`` rows of
    ``E`` kept assignments) and each rank's ``costs``; ``cores``: CPU cores the ranks share
    (``math.inf``: one each)."""
    p = cluster.world_size
    if len(counts) != p or len(costs) != p:
        raise ValueError(f"need {p} rows of counts and {p} costs")
    out = exchange_bytes(counts, d_model, itemsize)
    return run_spmd(cluster, moe_step, out, list(costs), len(counts[0]) // p,
                    {"cores": cores}, trace=trace)


def memory_per_rank(d_model: int, hidden: int, experts: int, world: int, tokens: int, k: int,
                    received_rows: int, itemsize: int = 4) -> dict[str, int]:
    """Bytes a rank holds at the end of forward (DeepSpeed-MoE §5's accounting: the router
    replicated, ``E/p`` experts per rank): ``parameters`` and their ``gradients`` (router
    ``d·E`` plus ``E/p`` experts of ``2·d·h + h + d``), and the ``activations`` kept for
    backward — the group and its router probabilities (``T·d + T·E``), the dispatched and
    returned rows (``2·T·k·d`` at most), and per received row its input, hidden layer before
    and after the GELU, and output (``2·d + 2·h``). ``received_rows``: the rows this rank's
    experts got (at most ``p·(E/p)·C``)."""
    params = d_model * experts + experts // world * (2 * d_model * hidden + hidden + d_model)
    activations = (tokens * (d_model + experts) + 2 * tokens * k * d_model
                   + received_rows * (2 * d_model + 2 * hidden))
    parts = {"parameters": params * itemsize, "gradients": params * itemsize,
             "activations": activations * itemsize}
    return {**parts, "total": sum(parts.values())}
