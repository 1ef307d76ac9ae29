"""One way to build this machine's simulated cluster from a calibration entry, in either tier.

* ``textbook`` — the model the textbook teaches: every message pays the ping-pong's α and
  moves at its bandwidth B; messages in flight at once share the host's bus at the bandwidth
  the concurrent exchanges reached (fair contention); each rank reduces at γ, copies at the
  measured copy rate and computes at the measured FLOP/s. Nothing is solved: each number is
  one primitive's fit.
* ``host`` — the textbook model plus the *host effects* this machine showed beyond it (a
  busy message's latency, the chain of wake-ups, gloo's receiver-driven sends, queued
  sends' weight, socket buffers, reductions among messages …), each solved from the
  primitive that measured it (:mod:`simulator.host.cluster`) and each named in
  :data:`simulator.host.effects.HOST_EFFECTS`, so that any of them can be left out.

Comparing the two tiers' predictions with one measurement shows what the formulas miss on
the reader's machine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from typing import Literal, TypeVar

from simulator.core.calibration import CalibrationEntry
from simulator.core.hardware import Cluster, Device
from simulator.core.network import Contention, Link, Topology

Model = Literal["textbook", "host"]
T = TypeVar("T", bound=str)
MODELS: tuple[Model, ...] = ("textbook", "host")
"""The model tiers, simplest first."""


def tiers_of(choice: str) -> tuple[Model, ...]:
    """The tiers a ``--model`` choice asks for, simplest first: ``both`` is every tier."""
    if choice == "both":
        return MODELS
    if choice not in MODELS:
        raise ValueError(f"unknown model {choice!r}; choose one of {', '.join(MODELS)} or both")
    return (choice,)


def shown_tier(tiers: Collection[T]) -> T:
    """The tier whose prediction a record shows as its ``predicted_s``: the host tier where it
    was predicted, else the first of ``tiers``."""
    return next((t for t in tiers if t == "host"), next(iter(tiers)))


def entry_device(entry: CalibrationEntry) -> Device:
    """One rank of a calibrated host: a CPU process computing at the measured FLOP/s, reducing
    at γ = 1/``reduce_Bps`` and copying at ``memcpy_Bps`` (bytes/s), memory not modelled."""
    return Device(name=f"{entry.host}-cpu", flops_per_s=entry.flops_per_s,
                  mem_bandwidth_Bps=3 * entry.reduce_Bps, memory_bytes=math.inf,
                  reduce_Bps=entry.reduce_Bps, memcpy_Bps=entry.memcpy_Bps)


def textbook_cluster(entry: CalibrationEntry, world_size: int | None = None,
                     contention: Contention = "fair") -> Cluster:
    """The textbook tier of a calibrated host (``world_size`` ranks, default the entry's).

    A port per rank with the ping-pong's fitted α (s) and B (bytes/s); where the calibration
    timed concurrent exchanges, every message also crosses one bus shared by all messages at
    their aggregate rate (never below B) — α-β with contention, the model of chapter 2's
    "Contention" section. Without that measurement the ranks are fully connected.
    """
    world_size = world_size or entry.world_size
    link = Link(entry.latency_s, entry.bandwidth_Bps, contention)
    if entry.bus_bandwidth_Bps > 0:
        topology = Topology.shared_bus(world_size, link,
                                       max(entry.bus_bandwidth_Bps, entry.bandwidth_Bps))
    else:
        topology = Topology.fully_connected(world_size, link)
    return Cluster.homogeneous(f"textbook-{entry.backend}x{world_size}", entry_device(entry),
                               topology)


def local_cluster(entry: CalibrationEntry, world_size: int | None = None,
                  model: Model | str = "host", effects: Collection[str] | None = None,
                  host_view: Callable[[CalibrationEntry], CalibrationEntry] | None = None
                  ) -> Cluster:
    """This host's simulated cluster in tier ``model`` — the one builder of every chapter's
    local cluster from a calibration entry.

    * ``textbook``: :func:`textbook_cluster` of ``entry`` *as measured*. ``effects`` and
      ``host_view`` are corrections of the host tier and are ignored here (``effects`` must
      still name host effects), so that a chapter names its host tier once (its effects, its
      view) and switches tiers by ``model`` alone.
    * ``host``: the loopback model with the host ``effects`` the entry measured
      (:func:`simulator.host.cluster.cluster_from_entry`; ``None``: those that pay,
      :data:`~simulator.host.effects.HOST_TIER`, the collectives' — the other chapters pass
      :data:`~simulator.host.effects.BUSY_HOST`), built from ``host_view(entry)`` where a
      chapter sees the entry its own way (DDP's ring: :func:`lab.ddp.ring_view`; tensor
      parallelism's waits: :func:`lab.tensor_parallel.waiting_view`).

    A shaped-network entry gives its shaped switch (in the host tier, of the view).
    """
    from simulator.host.cluster import cluster_from_entry
    from simulator.host.effects import HOST_TIER, resolve
    from simulator.host.shaped import shaped_cluster_from_entry

    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    if effects is not None:
        resolve(effects)  # a misspelt effect is an error in either tier
    if model == "host" and host_view is not None:
        entry = host_view(entry)
    if entry.network != "loopback":
        return shaped_cluster_from_entry(entry, world_size)
    if model == "textbook":
        return textbook_cluster(entry, world_size)
    return cluster_from_entry(entry, world_size,
                              effects=HOST_TIER if effects is None else effects)
