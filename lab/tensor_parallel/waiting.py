"""The calibrated cluster with the latency of the waiting primitive (:func:`waiting_cluster`):
what one blocking wait for a tiny message costs inside a chain of computation on this host,
measured by the tiny ring steps between short computations of
:func:`backends.tensor_parallel.measure.ring_steps`."""

from __future__ import annotations

from pathlib import Path

from backends.tensor_parallel.measure import WAIT_BYTES
from simulator.core.calibration import Calibration, CalibrationEntry
from simulator.core.hardware import Cluster
from simulator.host.effects import BUSY_HOST


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
    of a wait between computations is what
    :func:`~backends.tensor_parallel.measure.ring_steps` measures."""
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
