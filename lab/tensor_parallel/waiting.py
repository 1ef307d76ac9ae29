"""The waiting primitive: tiny ring steps between short computations (:func:`ring_steps`),
what one blocking wait for a tiny message costs inside a chain of computation on this host,
and the calibrated cluster with that latency (:func:`waiting_cluster`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from simulator.core.calibration import Calibration, CalibrationEntry
from simulator.core.hardware import Cluster
from simulator.host.effects import BUSY_HOST

WAIT_BYTES = 4096
"""Size of the messages of the waiting primitive (:func:`ring_steps`): half of an 8 KB
all-reduce, what one step of a 2-rank gloo ring moves."""
WAIT_COUNT = 16
"""Ring steps per timed call of the waiting primitive."""
FRAGMENT_MATMULS = 10
"""The compute between two ring steps of the primitive: this many 64 × 64 float32 matrix
products (~70 µs here, the size of the gaps between the small GPT's collectives)."""


def _fragment() -> Any:
    a = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))

    def run() -> None:
        for _ in range(FRAGMENT_MATMULS):
            a @ a

    return run


def ring_steps(nbytes: int = WAIT_BYTES, count: int = WAIT_COUNT, group: Any = None,
               compute: bool = True) -> Any:
    """The waiting primitive: a function that runs ``count`` ring steps — every rank sends
    ``nbytes`` to its left neighbour without waiting and blocks until as many arrive from its
    right (one step of gloo's ring, :func:`simulator.ddp.gloo_ring_all_reduce`) — each
    followed by a fragment of compute (:data:`FRAGMENT_MATMULS`) when ``compute``; the sends
    are waited for at the end. :func:`fragments` is the same compute without the steps.

    Timed with every rank at once, ``(steps − fragments) / count`` (means) is what one
    blocking wait for a tiny message costs *inside a chain of computation* on this host
    (see :func:`waiting_cluster`)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    ranks = [dist.get_global_rank(group, r) for r in range(world)] if group is not None \
        else list(range(world))
    left, right = ranks[(rank - 1) % world], ranks[(rank + 1) % world]
    out = torch.zeros(nbytes // 4)
    into = [torch.zeros(nbytes // 4) for _ in range(count)]
    fragment = _fragment()

    def run() -> None:
        sends = []
        for i in range(count):
            if world > 1:
                recv = dist.irecv(into[i], right, group=group, tag=i)
                sends.append(dist.isend(out, left, group=group, tag=i))
                assert recv is not None
                recv.wait()
            if compute:
                fragment()
        for send in sends:
            assert send is not None
            send.wait()

    return run


def wait_step(nbytes: int = WAIT_BYTES, group: Any = None) -> Any:
    """One blocking ring step of ``nbytes`` on ``group`` with no compute (:func:`ring_steps`
    with ``count = 1``): the wait a profile puts before each piece of compute it times
    (:func:`profile_together_rank`); every process of the group must call it alike."""
    return ring_steps(nbytes, 1, group, compute=False)


def fragments(count: int = WAIT_COUNT) -> Any:
    """``count`` compute fragments of :func:`ring_steps`, no messages."""
    fragment = _fragment()
    return lambda: [fragment() for _ in range(count)]


def waiting_view(entry: CalibrationEntry, exchange_s: float,
                 nbytes: int = WAIT_BYTES) -> CalibrationEntry:
    """``entry`` with the latency of a message taken from the waiting primitive: ``α =
    exchange_s − nbytes/B`` (never below 0) for a message alone and for one among others (the
    primitive's ring steps run on every rank at once — where the calibration measured the
    concurrent exchanges' latency), the chains of dependent messages cleared: every message
    pays α (why: :func:`waiting_cluster`)."""
    from dataclasses import replace

    alpha = max(exchange_s - nbytes / entry.bandwidth_Bps, 0.0)
    return replace(entry, latency_s=alpha, bus_latency_s=alpha if entry.bus_latency_s else 0,
                   chain_latency_s=[], chain_ahead_latency_s=[])


def waiting_cluster(world: int, exchange_s: float, nbytes: int = WAIT_BYTES,
                    calibration: Calibration | str | Path | None = None,
                    model: str = "host") -> tuple[Cluster, str]:
    """This machine's calibrated cluster in tier ``model``
    (:func:`simulator.host.factory.local_cluster`) and a description of it: the host tier
    (:data:`~simulator.host.effects.BUSY_HOST`) with the latency of a message taken from the
    waiting primitive (:func:`waiting_view`); the textbook tier the entry as measured.
    ``calibration``: the file read once, or its path (default: the user's). Without a
    calibration entry: the free network of :func:`lab.pipeline.local_cluster` in the host
    tier, :class:`~simulator.core.calibration.CalibrationError` in the textbook tier.

    Why: ``distml-lab calibrate`` fits α to the *median* ping-pong, right for a message timed
    alone. A step of the small GPT is a chain of dozens of blocking waits for tiny messages
    between short computations. On this 2-core VM (Linux 6.x, ``CONFIG_HZ=250``) the wait
    times are bimodal: most ~0.1–0.3 ms, but 5–15 % of them ~3–4 ms — the woken thread gets
    its core only at the next scheduler tick. A sum of waits costs their *mean*, and the mean
    of a wait between computations is what :func:`ring_steps` measures."""
    from simulator.core.calibration import CalibrationError
    from simulator.host.factory import local_cluster

    try:
        entry = Calibration.of(calibration).entry(world, "gloo")
    except CalibrationError:
        from lab.pipeline import local_cluster as free_or_local

        return free_or_local(world, calibration, model=model)
    waited = waiting_view(entry, exchange_s, nbytes)
    cluster = local_cluster(entry, world, model, effects=BUSY_HOST,
                            host_view=lambda e: waiting_view(e, exchange_s, nbytes))
    alpha = (waited if model == "host" else entry).latency_s
    return cluster, (f"calibrated cluster {cluster.name}, α = {alpha * 1e6:.0f} µs (a ring "
                     f"step of {nbytes} B between computations; the calibration's median: "
                     f"{entry.latency_s * 1e6:.0f} µs)")
