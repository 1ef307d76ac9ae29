"""PipeDream's planner: profile → stages and replication, by dynamic programming.

PipeDream (Narayanan et al., SOSP 2019, §3.1) pipelines asynchronously (1F1B with weight
stashing), so in steady state it finishes one input every ``max`` over its *stages* of the
time each stage needs per input. A stage may be *replicated* over ``r`` devices (data
parallel inside the stage, inputs dealt round-robin): it then needs ``1/r`` of its compute per
input, but its replicas must all-reduce their weight gradients. The planner picks the
partition of the layers into contiguous stages and the replica count of each stage, using at
most ``devices`` devices, that minimises the slowest stage — and so maximises throughput.

With a profile of ``n`` layers (``T_l`` = forward + backward s, ``a_l`` = output bytes,
``w_l`` = parameter bytes), one link of bandwidth ``B`` and latency ``α``:

* a stage of layers ``i..j`` on ``r`` replicas takes, per input,
  ``T(i→j, r) = (1/r) · max(Σ T_l, W_r(Σ w_l))`` where ``W_r(n)`` is the ring all-reduce time
  of ``n`` bytes over ``r`` ranks, ``2(r−1)α + 2n(r−1)/r·β``
  (:func:`simulator.collectives.all_reduce.ring_all_reduce_cost`; PipeDream overlaps it with
  compute, hence ``max``; the paper's parameter-server form is ``4(r−1)n/(rB)``);
* the boundary after layer ``i`` costs ``C_i = 2·(α + a_i/B)`` (activation forward, its
  gradient backward: the paper's ``2·C_i``), a pipeline stage of its own since communication
  overlaps compute; with ``full_duplex=True`` the two directions travel at once and it costs
  ``α + a_i/B``;
* ``A(j, m)`` — the slowest stage of the best pipeline of layers ``0..j`` on ``m`` devices::

      A(j, m) = min( T(0→j, m),
                     min over i < j, 1 ≤ m' < m of max(A(i, m − m'), C_i, T(i+1→j, m')) )

``O(n²·M²)``. Predicted throughput: ``1 / A(n−1, M)`` inputs per second. (The paper's planner
also handles hierarchies of links, level by level; here there is one level.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.collectives.all_reduce import ring_all_reduce_cost
from simulator.pipeline.profile import LayerProfile


@dataclass(frozen=True)
class PlannedStage:
    """One stage of a plan.

    Attributes:
        layers: the layer indices it holds.
        replicas: devices it is replicated over (data parallel inside the stage).
        time_s: its time per input, ``T(i→j, r)``, s.
    """

    layers: range
    replicas: int
    time_s: float


@dataclass(frozen=True)
class PipeDreamPlan:
    """The planner's answer.

    Attributes:
        stages: the stages, first to last.
        time_per_input_s: the slowest stage or boundary, s — the steady-state time per input.
        throughput: inputs per second, ``1 / time_per_input_s``.
        devices: devices used (``Σ replicas``).
    """

    stages: list[PlannedStage]
    time_per_input_s: float
    throughput: float
    devices: int

    @property
    def balance(self) -> list[int]:
        """Layers per stage, torchgpipe style."""
        return [len(s.layers) for s in self.stages]

    @property
    def replicas(self) -> list[int]:
        """Replicas per stage (PipeDream writes a plan as ``"2-1-1"``)."""
        return [s.replicas for s in self.stages]


def stage_time(profile: Sequence[LayerProfile], layers: range, replicas: int,
               bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """``T(i→j, r)``: per-input time of a stage of ``layers`` on ``replicas`` devices, s."""
    compute = sum(profile[k].time_s for k in layers)
    weights = sum(profile[k].parameter_bytes for k in layers)
    sync = ring_all_reduce_cost(replicas, weights, latency_s, 1.0 / bandwidth_Bps)
    return max(compute, sync) / replicas


def boundary_time(profile: Sequence[LayerProfile], after: int, bandwidth_Bps: float,
                  latency_s: float = 0.0, full_duplex: bool = False) -> float:
    """``C_i``: the activation after layer ``after`` forward plus its gradient backward, s
    (one after the other; at once when ``full_duplex``)."""
    return (1 if full_duplex else 2) * (latency_s + profile[after].out_bytes / bandwidth_Bps)


def plan_pipedream(profile: Sequence[LayerProfile], devices: int, bandwidth_Bps: float,
                   latency_s: float = 0.0, full_duplex: bool = False) -> PipeDreamPlan:
    """The plan of least time per input on at most ``devices`` devices (PipeDream §3.1)."""
    n = len(profile)
    if n < 1:
        raise ValueError("the profile has no layers")
    if devices < 1:
        raise ValueError(f"need at least 1 device, got {devices}")
    if not bandwidth_Bps > 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth_Bps}")
    inf, beta = float("inf"), 1.0 / bandwidth_Bps
    time_sum, weight_sum = [0.0], [0]
    for layer in profile:
        time_sum.append(time_sum[-1] + layer.time_s)
        weight_sum.append(weight_sum[-1] + layer.parameter_bytes)

    def t(first: int, last: int, r: int) -> float:  # stage_time of layers first..last
        sync = ring_all_reduce_cost(r, weight_sum[last + 1] - weight_sum[first], latency_s, beta)
        return max(time_sum[last + 1] - time_sum[first], sync) / r

    # best[j][m] = (A(j, m), split): split None = one stage; else (i, m') as in the docstring
    best: list[list[tuple[float, tuple[int, int] | None]]] = [
        [(inf, None)] * (devices + 1) for _ in range(n)]
    for j in range(n):
        for m in range(1, devices + 1):
            value = t(0, j, m)
            split: tuple[int, int] | None = None
            for i in range(j):
                comm = boundary_time(profile, i, bandwidth_Bps, latency_s, full_duplex)
                for m2 in range(1, m):
                    candidate = max(best[i][m - m2][0], comm, t(i + 1, j, m2))
                    if candidate < value:
                        value, split = candidate, (i, m2)
            best[j][m] = (value, split)
    m = min(range(1, devices + 1), key=lambda k: (best[n - 1][k][0], k))
    stages: list[PlannedStage] = []
    j, time_per_input = n - 1, best[n - 1][m][0]
    while True:
        split = best[j][m][1]
        first = 0 if split is None else split[0] + 1
        replicas = m if split is None else split[1]
        layers = range(first, j + 1)
        stages.append(PlannedStage(layers, replicas,
                                   stage_time(profile, layers, replicas, bandwidth_Bps,
                                              latency_s)))
        if split is None:
            break
        j, m = split[0], m - split[1]
    stages.reverse()
    return PipeDreamPlan(stages, time_per_input, 1.0 / time_per_input if time_per_input else inf,
                         sum(s.replicas for s in stages))


def plan_time(profile: Sequence[LayerProfile], balance: Sequence[int], replicas: Sequence[int],
              bandwidth_Bps: float, latency_s: float = 0.0, full_duplex: bool = False) -> float:
    """Time per input of a given plan (slowest stage or boundary), s — the DP's objective."""
    if len(balance) != len(replicas):
        raise ValueError(f"{len(balance)} stages but {len(replicas)} replica counts")
    worst, start = 0.0, 0
    for k, (b, r) in enumerate(zip(balance, replicas, strict=True)):
        worst = max(worst, stage_time(profile, range(start, start + b), r, bandwidth_Bps,
                                      latency_s))
        start += b
        if k < len(balance) - 1:
            worst = max(worst, boundary_time(profile, start - 1, bandwidth_Bps, latency_s,
                                             full_duplex))
    return worst
