"""The simulated DDP step on this machine's calibrated local cluster.

:func:`predict` runs :func:`simulator.ddp.predict_step` on the calibrated local cluster as
gloo's ring sees it (:func:`gloo_ring_cluster`), with the host's cores shared by every rank's
backward and communication threads (:class:`simulator.ddp.CoreShare`). Nothing here is fitted
to a DDP measurement: the profile (one process), the calibration and the core count only.
"""

from __future__ import annotations

from dataclasses import replace

from simulator.core.calibration import CalibrationEntry
from simulator.core.hardware import Cluster
from simulator.ddp import DDPPrediction, Interference, Workload, predict_step
from simulator.host.effects import BUSY_HOST
from simulator.host.factory import local_cluster


def ring_view(entry: CalibrationEntry) -> CalibrationEntry:
    """``entry`` as gloo's ring all-reduce of MiB-sized buckets sees it: every message pays
    max(α, ``bus_latency_s``), and the chain of dependent messages is cleared (why:
    :func:`gloo_ring_cluster`)."""
    return replace(entry, latency_s=max(entry.latency_s, entry.bus_latency_s),
                   chain_latency_s=[])


def gloo_ring_cluster(entry: CalibrationEntry, world: int, model: str = "host") -> Cluster:
    """The calibrated local cluster as gloo's ring all-reduce of MiB-sized buckets sees it,
    in tier ``model`` (:func:`simulator.host.factory.local_cluster`): the host tier is
    :data:`~simulator.host.effects.BUSY_HOST` on :func:`ring_view` of the entry; the
    textbook tier :func:`~simulator.host.factory.textbook_cluster` of the entry as measured.

    In a ring every rank sends at once, so no segment travels alone: each pays the latency
    of the calibration's *concurrent exchanges* (``bus_latency_s``, the intercept of their
    fit), the first of a step too, not the idle ping-pong's α (at 2 ranks a step of the ring
    *is* that exchange: 1 MiB calibrated at 0.69 ms, 0.55 with α for the first message).
    The chain of dependent 4 KiB messages (``chain_latency_s``: up to 1.8 ms a step at 4
    ranks on 2 cores — a wait for a time slice) is left out: gloo's busy threads streaming
    megabytes do not pay it per segment (24 MiB at 4 ranks measured alone 36–38 ms; the
    chain latency would predict 49–58 ms). Shared by :func:`predict` and
    :func:`lab.horovod.costs`."""
    return local_cluster(entry, world, model, effects=BUSY_HOST, host_view=ring_view)


def predict(entry: CalibrationEntry, workload: Workload, world: int,
            bucket_cap_mb: float | None, overlap: bool = True,
            contention: Interference | None = None,
            cluster: Cluster | None = None) -> DDPPrediction:
    """The simulated step on the calibrated local cluster (as the buckets' all-reduces see it:
    :func:`gloo_ring_cluster`; or on ``cluster``, the textbook tier's
    :func:`simulator.host.factory.textbook_cluster` say), ranks sharing ``entry.cores``;
    ``contention`` is :func:`interference` at this world size (``None``: processor
    sharing)."""
    from simulator.ddp import bucket_caps

    cap, first = bucket_caps(bucket_cap_mb)
    cluster = gloo_ring_cluster(entry, world) if cluster is None else cluster
    return predict_step(cluster, workload, cap, first, overlap, cores=float(entry.cores),
                        interference=contention)
