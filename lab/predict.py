"""The prediction side of a comparison: the simulated twin on this machine's model, and the
textbook's closed form beside it.

* :func:`local_cluster` — this machine's loopback model in either tier, solved once per
  calibration and world;
* :func:`predict` — simulated seconds per call of each size (and the closed form), on that
  model, a preset cluster, or this machine's ranks on a shaped network;
* :func:`closed_form` — the twin's formula with the cluster's α, β and γ.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.twins import Twin
from simulator.core.calibration import Calibration
from simulator.core.cluster_file import resolve
from simulator.core.hardware import Cluster
from simulator.host import shaped_host_cluster
from simulator.host.factory import Model
from simulator.host.factory import local_cluster as factory_cluster


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


def local_cluster(world: int, backend: str = "gloo",
                  calibration: Calibration | str | Path | None = None,
                  model: Model = "host") -> Cluster:
    """This machine's model on loopback in tier ``model``
    (:func:`simulator.host.factory.local_cluster`): the host tier is the collectives' model —
    the bus fitted to bandwidth-bound exchanges, gloo's receiver-driven sends with the
    calibrated notice and posting overhead, every host effect the calibration measured; the
    textbook tier α, β, γ and contention only. What :func:`predict` and the report's timelines
    use.

    Solving the host tier takes seconds (:mod:`simulator.host.bus`), so a model is kept for as
    long as its :class:`~simulator.core.calibration.Calibration` lives — or, given a path, as
    long as that file is unchanged (one solve per world for a whole sweep)."""
    from simulator.core.calibration import default_calibration_path

    if isinstance(calibration, Calibration):
        return _solved(calibration, world, backend, model)
    path = Path(calibration) if calibration is not None else default_calibration_path()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:  # no file: the lookup says so
        return _solved(Calibration.load(path), world, backend, model)
    return _solved_file(str(path.resolve()), stamp, world, backend, model)


@functools.lru_cache(maxsize=16)
def _solved(calibration: Calibration, world: int, backend: str, model: Model) -> Cluster:
    """:func:`local_cluster` of one loaded calibration."""
    return factory_cluster(calibration.entry(world, backend), world, model)


@functools.lru_cache(maxsize=16)
def _solved_file(path: str, stamp: int, world: int, backend: str, model: Model) -> Cluster:
    """:func:`local_cluster` of the calibration file ``path`` as of ``stamp`` (its mtime)."""
    return factory_cluster(Calibration.load(path).entry(world, backend), world, model)


@dataclass(frozen=True)
class Plan:
    """How one world of a prediction is simulated: the cluster, its name in the records, and
    the exact fast path taken (``None``: the per-rank events)."""

    machine: Cluster
    label: str
    fast: Callable[[int], float] | None

    @property
    def engine(self) -> str:
        """``fast`` or ``events``: what the records say."""
        return "events" if self.fast is None else "fast"


def plan(twin: Twin, world: int, cluster: str = "local",
         calibration: Calibration | str | Path | None = None, backend: str = "gloo",
         network: str = "loopback", bandwidth: str | Sequence[str | int] | None = None,
         model: Model = "host", engine: str = "auto", calls: Sequence[int] | None = None
         ) -> Plan:
    """The cluster of one world (this machine's model, a preset, or this machine's ranks on a
    shaped network) and the engine: with ``auto`` or ``fast`` the twin's exact fast path
    where one exists on that cluster (:func:`lab.twins_collectives.fast_simulate`) and every
    point is one call; else the events."""
    from lab.twins_collectives import fast_simulate

    check_world(twin, world)
    if network == "shaped" and cluster == "local":
        path = calibration.path if isinstance(calibration, Calibration) else calibration
        machine = shaped_host_cluster(world, bandwidth or "1gbit", backend, path)
        cluster = machine.name
    elif cluster == "local":
        machine = local_cluster(world, backend, calibration, model)
    else:
        machine = resolve(cluster, world)  # a preset, or a cluster file
    sustained = calls is not None and any(k != 1 for k in calls)
    fast = None if engine == "events" or sustained else fast_simulate(twin.name, machine)
    return Plan(machine, cluster, fast)


def predict(twin: Twin, world: int, sizes: Sequence[int], cluster: str = "local",
            calibration: Calibration | str | Path | None = None, backend: str = "gloo",
            network: str = "loopback", bandwidth: str | Sequence[str | int] | None = None,
            calls: Sequence[int] | None = None, model: Model = "host", engine: str = "auto",
            chosen: Plan | None = None, on_point: Callable[[], object] | None = None
            ) -> list[dict[str, Any]]:
    """Simulated time (and closed form) of each size at one world size.

    ``network="shaped"`` (with ``cluster="local"``) predicts for this machine's ranks on the
    shaped network of ``bandwidth``: :func:`~simulator.host.shaped_host_cluster`, from that
    network's calibration. On loopback ``model`` picks the tier (:func:`local_cluster`).

    ``calls`` (one per size): predict the time per call of that many calls run back to back
    on every rank, as :func:`measure_sustained` times them (``None``: one call).

    ``engine`` (``auto``, ``events``, ``fast``) chooses as :func:`plan` does, unless
    ``chosen`` brings that plan made already; each record says which ran (``engine``).
    ``on_point`` is called after each size (a progress bar's tick).
    """
    if calls is not None and len(calls) != len(sizes):
        raise ValueError(f"{len(calls)} call counts for {len(sizes)} sizes")
    chosen = chosen or plan(twin, world, cluster, calibration, backend, network, bandwidth,
                            model, engine, calls)
    machine = chosen.machine
    rows = []
    for i, nbytes in enumerate(sizes):
        k = 1 if calls is None else calls[i]
        if chosen.fast is not None:
            seconds = chosen.fast(nbytes)
        else:
            seconds = twin.simulate(machine, nbytes, calls=k, trace=False).makespan_s / k
        rows.append({"twin": twin.name, "world": world, "bytes": nbytes,
                     "predicted_s": seconds, "calls": k,
                     "closed_form_s": closed_form(twin, machine, nbytes),
                     "cluster": chosen.label, "engine": chosen.engine,
                     "model": model if chosen.label == "local" else "preset"})
        if on_point is not None:
            on_point()
    return rows


def check_world(twin: Twin, world: int) -> None:
    """A world size the twin can run at (``ValueError`` otherwise)."""
    if world < twin.min_world:
        raise ValueError(f"{twin.name} needs a world of at least {twin.min_world} ranks, "
                         f"got {world}")
