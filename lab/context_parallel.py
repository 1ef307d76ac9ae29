"""Context parallelism predicted and measured (book chapter 21): ring attention and Ulysses,
one step of causal attention (forward and backward) over a sequence split across ranks.

* :func:`profile_costs` — what a rank's compute costs, from a ONE-process profile on one
  thread: each kind of ring step (:func:`backends.context_parallel.measure.profile_ring_steps`,
  the very step functions the ring runs) or Ulysses' local attention over ``heads/world``
  heads of the whole sequence
  (:func:`backends.context_parallel.measure.profile_local_attention`);
* :func:`predict_step` — :func:`simulator.context_parallel.simulate_context_parallel` on this
  machine's calibrated twin in either tier of :func:`simulator.host.factory.local_cluster`,
  the ranks sharing its cores;
* :func:`measure_step` — the real step on ``world`` processes
  (:func:`backends.context_parallel.measure.time_step`), the slowest rank's median, p10, p90.

The attention is :data:`SHAPE` at a sequence length the sweep chooses. Seconds and bytes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from backends.context_parallel.measure import (
    profile_local_attention,
    profile_ring_steps,
    step_stats,
    time_step,
)
from backends.launch import spawn
from simulator.context_parallel import (
    AttentionShape,
    StepCosts,
    check,
    ring_activation_bytes,
    ring_traffic_bytes,
    simulate_context_parallel,
    ulysses_activation_bytes,
    ulysses_traffic_bytes,
)
from simulator.core.calibration import Calibration
from simulator.host.effects import BUSY_HOST
from simulator.host.factory import local_cluster

SHAPE = AttentionShape(batch=1, heads=8, seq=0, dim=32, causal=True, itemsize=4)
"""The attention of every point: 1 sequence, 8 heads of 32 features, causal, fp32; ``seq``
is the point."""


def shape_at(seq: int) -> AttentionShape:
    """:data:`SHAPE` with ``seq`` tokens."""
    return replace(SHAPE, seq=seq)


def profile_costs(scheme: str, world: int, seq: int, repeats: int = 5) -> StepCosts:
    """One rank's compute in a step of ``scheme`` at ``world``, from a one-process profile."""
    shape = shape_at(seq)
    check(shape, world, scheme)
    if scheme == "ring":
        steps = profile_ring_steps(shape.batch, shape.heads, seq, shape.dim, world,
                                   shape.causal, repeats)
        prologue = steps.pop("prologue")["backward"]
        return StepCosts({k: v["forward"] for k, v in steps.items()},
                         {k: v["backward"] for k, v in steps.items()}, prologue)
    local = profile_local_attention(shape.batch, shape.heads // world, seq, shape.dim,
                                    shape.causal, repeats)
    return StepCosts({"local": local["forward"]}, {"local": local["backward"]})


def predict_step(scheme: str, world: int, seq: int, costs: StepCosts,
                 calibration: Calibration | str | Path | None = None,
                 model: str = "host") -> float:
    """Predicted seconds of one step of ``scheme`` in tier ``model`` from the profile
    ``costs`` and the calibration (default: the user's)."""
    entry = Calibration.of(calibration).entry(world, "gloo")
    cluster = local_cluster(entry, world, model, effects=BUSY_HOST)
    return simulate_context_parallel(cluster, scheme, shape_at(seq), costs,
                                     cores=entry.cores, trace=False).makespan_s


def traffic_bytes(scheme: str, world: int, seq: int) -> int:
    """Bytes one rank sends in a step (the simulator's closed forms)."""
    count = ring_traffic_bytes if scheme == "ring" else ulysses_traffic_bytes
    return count(shape_at(seq), world)


def activation_bytes(scheme: str, world: int, seq: int) -> int:
    """Most attention-tensor bytes a rank holds in a step (the simulator's closed forms)."""
    count = ring_activation_bytes if scheme == "ring" else ulysses_activation_bytes
    return count(shape_at(seq), world)


def measure_step(scheme: str, world: int, seq: int, repeats: int = 10) -> dict[str, Any]:
    """The real step on ``world`` processes: median, p10 and p90 of the slowest rank, s."""
    shape = shape_at(seq)
    check(shape, world, scheme)
    samples = spawn(time_step, world, scheme, shape.batch, shape.heads, seq, shape.dim,
                    shape.causal, repeats, timeout=120)[0]
    return step_stats(samples)
