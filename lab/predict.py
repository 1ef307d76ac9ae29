"""The prediction side of a comparison: the simulated twin on this machine's model, and the
textbook's closed form beside it.

* :func:`local_cluster` — the collectives' loopback model of this machine, solved once per
  calibration file and world;
* :func:`predict` — simulated seconds per call of each size (and the closed form), on that
  model, a preset cluster, or this machine's ranks on a shaped network;
* :func:`closed_form` — the twin's formula with the cluster's α, β and γ.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.twins import Twin
from simulator.core.hardware import Cluster, preset
from simulator.host import local_host_cluster, shaped_host_cluster


def closed_form(twin: Twin, cluster: Cluster, nbytes: int) -> float | None:
    """The twin's formula with the cluster's rank 0 → 1 path α and β and rank 0's γ
    (None if it has none)."""
    if twin.closed_form is None or cluster.world_size < 2:
        return None
    topo = cluster.topology
    alpha = topo.path_latency_s(0, 1)
    beta = 1.0 / topo.path_bandwidth_Bps(0, 1)
    return twin.closed_form(cluster.world_size, nbytes, alpha, beta,
                            cluster.devices[0].gamma_s_per_B)


def local_cluster(world: int, backend: str = "gloo", calibration: str | Path | None = None
                  ) -> Cluster:
    """The collectives' model of this machine on loopback
    (:func:`~simulator.host.local_host_cluster`): the bus fitted to bandwidth-bound exchanges,
    gloo's receiver-driven sends with the calibrated notice and posting overhead. What
    :func:`predict` and the report's timelines use.

    Solving the bus takes seconds (:mod:`simulator.host.bus`), so the model is kept for as
    long as its calibration file is unchanged (one solve per world for a whole sweep)."""
    from simulator.core.calibration import default_calibration_path

    path = Path(calibration) if calibration is not None else default_calibration_path()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:  # no file: local_host_cluster says so
        return local_host_cluster(world, backend, calibration, exchange_bus=True,
                                  receiver_driven=True)
    return _solved_local(world, backend, str(path.resolve()), stamp)


@functools.lru_cache(maxsize=16)
def _solved_local(world: int, backend: str, path: str, stamp: int) -> Cluster:
    """:func:`local_cluster` of the calibration file ``path`` as of ``stamp`` (its mtime)."""
    return local_host_cluster(world, backend, path, exchange_bus=True, receiver_driven=True)


def predict(twin: Twin, world: int, sizes: Sequence[int], cluster: str = "local",
            calibration: str | Path | None = None, backend: str = "gloo",
            network: str = "loopback", bandwidth: str | Sequence[str | int] | None = None,
            calls: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Simulated time (and closed form) of each size at one world size.

    ``network="shaped"`` (with ``cluster="local"``) predicts for this machine's ranks on the
    shaped network of ``bandwidth``: :func:`~simulator.host.shaped_host_cluster`, from that
    network's calibration.
    On loopback the ranks' sends are gloo's, receiver-driven
    (:attr:`Cluster.receiver_driven_sends`).

    ``calls`` (one per size): predict the time per call of that many calls run back to back
    on every rank, as :func:`measure_sustained` times them (``None``: one call).
    """
    check_world(twin, world)
    if network == "shaped" and cluster == "local":
        machine = shaped_host_cluster(world, bandwidth or "1gbit", backend, calibration)
        cluster = machine.name
    elif cluster == "local":
        machine = local_cluster(world, backend, calibration)
    else:
        machine = preset(cluster, world)
    if calls is not None and len(calls) != len(sizes):
        raise ValueError(f"{len(calls)} call counts for {len(sizes)} sizes")
    rows = []
    for i, nbytes in enumerate(sizes):
        k = 1 if calls is None else calls[i]
        result = twin.simulate(machine, nbytes, calls=k)
        rows.append({"twin": twin.name, "world": world, "bytes": nbytes,
                     "predicted_s": result.makespan_s / k, "calls": k,
                     "closed_form_s": closed_form(twin, machine, nbytes),
                     "cluster": cluster})
    return rows


def check_world(twin: Twin, world: int) -> None:
    """A world size the twin can run at (``ValueError`` otherwise)."""
    if world < twin.min_world:
        raise ValueError(f"{twin.name} needs a world of at least {twin.min_world} ranks, "
                         f"got {world}")
