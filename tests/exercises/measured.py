"""What the "predict then measure" graders share (exercises 2.5, 3.4 and 8.4).

Each of these exercises asks for a prediction function; its grader measures the real twin on
the student's machine and scores the prediction by its error against that measurement, with
the tolerance that the lab's own prediction reaches there *in the same run*:

* :func:`primitives` — a quick calibration of this machine at ``world`` ranks, with the lab's
  own primitives (the ping-pong, the concurrent exchange, reduction, copy and matmul of
  :mod:`backends.primitives`, fitted by :func:`lab.calibrate.fit_alpha_beta`) — seconds,
  where ``distml-lab calibrate --quick`` takes about a minute — with a collective twin timed
  in the same rounds as the ping-pong (a slow spell of the machine spoils both alike), or a
  strategy's real twin run right after it in the same launch. Kept for the test session.
* :func:`textbook` — the simulator's textbook cluster of such a calibration
  (:func:`simulator.host.factory.textbook_cluster`: α, B, γ, the messages in flight sharing
  the host's bus fairly), the model the exercises' formulas describe; where a formula's
  messages travel together (the ring's p per step) it gets the β of one message among them
  (:meth:`Measured.busy_beta_s_per_B`).
* :func:`tolerance` and :func:`judge` — the scoring rule: the median relative error of the
  student's prediction may reach ``max(1.5 × lab, lab + 0.10)``, where ``lab`` is the larger
  median relative error of the lab's two textbook predictions of the same points from the
  same calibration (its simulated twin and its closed form).

Times are seconds, sizes bytes.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from simulator.core.calibration import CalibrationEntry, this_host
from simulator.core.hardware import Cluster

KiB, MiB = 2**10, 2**20
PING_PONG_SIZES = (16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB)
"""The ping-pong sweep of the quick calibration, bytes (α from the small, β from the large)."""
EXCHANGE_SIZES = (256 * KiB, 1 * MiB, 4 * MiB)
"""The concurrent exchange's sizes, bytes per message (the host's bus bandwidth)."""
REPEATS = 7
"""Repeats of every timed operation (each repeat lasts about SUSTAINED_REPEAT_S)."""
LAUNCH_TIMEOUT_S = 60
TOLERANCE_FACTOR, TOLERANCE_MARGIN = 1.5, 0.10
"""The student's median relative error may reach max(FACTOR × the lab's, the lab's + MARGIN)."""


# ---- inside the ranks -------------------------------------------------------------------------

def primitives_rank(twin: str | None, twin_sizes: Sequence[int], repeats: int,
                    then: tuple[Callable[..., Any], tuple[Any, ...]] | None = None
                    ) -> dict[str, Any]:
    """Rank function: the ping-pong of :data:`PING_PONG_SIZES` (ranks 0 and 1; the others
    idle, as in the lab's calibration), the concurrent exchange of :data:`EXCHANGE_SIZES`
    (:func:`backends.primitives.pair_exchange`) and the registered twin ``twin`` at each of
    ``twin_sizes``, their repeats interleaved (:func:`backends.measure.measure_many`); then
    the reduction, copy and matmul rates in every rank at once; then ``then``'s rank
    function on its arguments, if given (a strategy's real twin: one launch for both).
    Every rank returns the same medians, and its own result of ``then`` (``"then"``)."""
    import torch

    from backends.collectives.point_to_point import ping_pong
    from backends.measure import measure, measure_many
    from backends.primitives import pair_exchange
    from lab.twins import get_twin
    from simulator.core.calibration import SUSTAINED_REPEAT_S

    bufs = [torch.zeros(n, dtype=torch.uint8) for n in PING_PONG_SIZES]
    steps = [functools.partial(ping_pong, b) for b in bufs]
    steps += [functools.partial(pair_exchange, torch.zeros(n, dtype=torch.uint8),
                                torch.empty(n, dtype=torch.uint8)) for n in EXCHANGE_SIZES]
    if twin is not None:
        steps += [get_twin(twin).real_step(n, None) for n in twin_sizes]
    timings = measure_many(steps, repeats=repeats, repeat_s=SUSTAINED_REPEAT_S)
    del bufs, steps
    elems = 4 * MiB  # 16 MiB of float32, as the lab's calibration reduces
    a, b = torch.rand(elems), torch.rand(elems)
    reduce_s = measure(lambda: a.add_(b), repeats=repeats).median_s
    copy_s = measure(lambda: a.copy_(b), repeats=repeats).median_s
    m = 256
    x, y = torch.rand(m, m), torch.rand(m, m)
    mm_s = measure(lambda: torch.mm(x, y), repeats=repeats).median_s
    a = b = x = y = torch.empty(0)  # free 32 MiB before the strategy runs
    after = None if then is None else then[0](*then[1])
    calibrating = len(PING_PONG_SIZES) + len(EXCHANGE_SIZES)
    return {"one_way_s": [t.median_s / 2 for t in timings[:len(PING_PONG_SIZES)]],
            "exchange_s": [t.median_s for t in timings[len(PING_PONG_SIZES):calibrating]],
            "twin_s": [t.median_s for t in timings[calibrating:]],
            "reduce_Bps": 4 * elems / reduce_s, "memcpy_Bps": 4 * elems / copy_s,
            "flops_per_s": 2 * m**3 / mm_s, "then": after}


# ---- in the test process ----------------------------------------------------------------------

@dataclass(frozen=True)
class Measured:
    """One launch's quick calibration (``entry``), the twin's medians beside it (s), and
    what the rank function run after it returned on each rank (``then``, by rank)."""

    entry: CalibrationEntry
    twin_s: tuple[float, ...] = field(default=())
    then: Any = None

    @property
    def alpha_s(self) -> float:
        return self.entry.latency_s

    @property
    def beta_s_per_B(self) -> float:
        return 1.0 / self.entry.bandwidth_Bps

    @property
    def gamma_s_per_B(self) -> float:
        return 1.0 / self.entry.reduce_Bps

    def busy_beta_s_per_B(self, messages: int) -> float:
        """β of one of ``messages`` messages in flight at once, s/B: each gets its share of
        the bus (the textbook's fair contention), never more than a lone message's rate."""
        bus = self.entry.bus_bandwidth_Bps
        return max(self.beta_s_per_B, messages / bus if bus > 0 else 0.0)

    def describe(self, messages: int = 1) -> str:
        """``α = … µs, 1/β = … GB/s, 1/γ = … GB/s``: the calibration a prediction got, β that
        of one of ``messages`` messages in flight at once."""
        return (f"α = {self.alpha_s * 1e6:.1f} µs, 1/β = "
                f"{1 / self.busy_beta_s_per_B(messages) / 1e9:.2f} GB/s (bus "
                f"{self.entry.bus_bandwidth_Bps / 1e9:.2f} GB/s), 1/γ = "
                f"{self.entry.reduce_Bps / 1e9:.2f} GB/s")


@functools.lru_cache(maxsize=8)
def primitives(world: int, twin: str | None = None, twin_sizes: tuple[int, ...] = (),
               then: tuple[Callable[..., Any], tuple[Any, ...]] | None = None) -> Measured:
    """A quick calibration at ``world`` ranks (one launch, kept for the test session), with
    ``twin`` timed at ``twin_sizes`` in the same rounds, and then ``(rank_fn, args)``'s
    rank function run in the same launch. α and β are the lab's relative
    least-squares fit of the ping-pong's one-way times (:func:`lab.calibrate.fit_alpha_beta`);
    the bus is the aggregate rate of the concurrent exchange, fitted as :func:`lab.calibrate
    .calibrate` fits it (its intercept the busy latency)."""
    from backends.launch import spawn
    from lab.calibrate import fit_alpha_beta
    from simulator.core.calibration import exchange_flows

    outs = spawn(primitives_rank, world, twin, list(twin_sizes), REPEATS, then,
                 backend="gloo", timeout=LAUNCH_TIMEOUT_S)
    out = outs[0]
    fit = fit_alpha_beta(PING_PONG_SIZES, out["one_way_s"])
    flows = exchange_flows(world)
    try:
        bus = fit_alpha_beta([flows * n for n in EXCHANGE_SIZES], out["exchange_s"])
        bus_Bps, bus_latency_s = bus.bandwidth_Bps, bus.alpha_s
    except ValueError:  # too noisy for a line: the largest exchange alone, as the lab does
        bus_Bps, bus_latency_s = flows * EXCHANGE_SIZES[-1] / out["exchange_s"][-1], 0.0
    entry = CalibrationEntry(this_host(), "gloo", world, fit.alpha_s, fit.bandwidth_Bps,
                             float(out["reduce_Bps"]), float(out["memcpy_Bps"]),
                             float(out["flops_per_s"]), bus_bandwidth_Bps=bus_Bps,
                             bus_latency_s=bus_latency_s, cores=os.cpu_count() or 1,
                             p2p_sizes=list(PING_PONG_SIZES),
                             p2p_times_s=list(out["one_way_s"]),
                             fit_rel_residuals=list(fit.rel_residuals),
                             exchange_sizes=list(EXCHANGE_SIZES),
                             exchange_times_s=list(out["exchange_s"]))
    return Measured(entry, tuple(out["twin_s"]), [o["then"] for o in outs])


def textbook(measured: Measured, world: int) -> Cluster:
    """The simulator's textbook cluster of ``measured``'s calibration at ``world`` ranks."""
    from simulator.host.factory import textbook_cluster

    return textbook_cluster(measured.entry, world)


def rel_errors(predicted_s: Sequence[float], measured_s: Sequence[float]) -> list[float]:
    """|predicted − measured| / measured, point by point."""
    return [abs(p - m) / m for p, m in zip(predicted_s, measured_s, strict=True)]


def tolerance(lab_error: float) -> float:
    """The median relative error a prediction may reach where the lab's own reaches
    ``lab_error``: max(1.5 × it, it + 0.10)."""
    return max(TOLERANCE_FACTOR * lab_error, lab_error + TOLERANCE_MARGIN)


def judge(points: Sequence[str], yours_s: Sequence[float], lab_s: dict[str, Sequence[float]],
          measured_s: Sequence[float], context: str) -> None:
    """Fail the test (one readable message) unless the median relative error of ``yours_s``
    against ``measured_s`` is within :func:`tolerance` of the lab's own.

    ``lab_s``: the lab's predictions of the same points from the same calibration, by name
    (its simulated twin, its closed form); the lab's error is the larger of their median
    relative errors — what the lab's own textbook tier reaches on this machine today."""
    bad = [f"{p}: {y!r}" for p, y in zip(points, yours_s, strict=True)
           if not (isinstance(y, float) and 0 < y < math.inf)]
    if bad:
        pytest.fail(f"{context}: a prediction must be a positive, finite float of seconds; "
                    f"yours: {', '.join(bad)}", pytrace=False)
    yours = statistics.median(rel_errors(yours_s, measured_s))
    labs = {name: statistics.median(rel_errors(s, measured_s)) for name, s in lab_s.items()}
    lab = max(labs.values())
    theirs = ", ".join(f"{name} {e:.0%}" for name, e in labs.items())
    print(f"{context}: median relative error yours {yours:.0%}; {theirs}; "
          f"tolerance {tolerance(lab):.0%}")  # shown with `pytest -s`, and on a failure
    if yours <= tolerance(lab):
        return
    rows = "; ".join(f"{p}: measured {m * 1e3:.2f} ms, yours {y * 1e3:.2f} ms" + "".join(
        f", {name} {s[i] * 1e3:.2f} ms" for name, s in lab_s.items())
        for i, (p, m, y) in enumerate(zip(points, measured_s, yours_s, strict=True)))
    pytest.fail(f"{context}: your prediction misses the measurement by {yours:.0%} (median), "
                f"the lab's own by {theirs}, so up to {tolerance(lab):.0%} passes. {rows}",
                pytrace=False)
