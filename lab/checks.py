"""What the lab refuses before it starts any work: sweeps too large to simulate or to run,
messages smaller than one element, a backend this machine lacks.

Every check raises :class:`lab.units.UsageError` with one line in user terms, so the CLI prints
it and exits with status 2 before a process is spawned or a byte is written. The limits are
sanity bounds, not tuned numbers: each keeps one request inside what this program can finish in
minutes without running into the kernel's OOM killer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from lab.units import UsageError, format_size

MAX_SIMULATED_RANKS = 1024
"""Ranks a discrete-event simulation takes: every rank is a SimPy process and every message an
event, so a ring all-reduce over 512 ranks already takes some 20 s on one core."""

MAX_FAST_RANKS = 65_536
"""Ranks an exact fast path takes (:mod:`simulator.collectives.fast`): ``O(p)`` numpy arrays a
step and a route per message, some seconds at this size."""

ENGINES = ("auto", "events", "fast")
"""``--engine``: an exact fast path where one exists, else events (``auto``); always the
per-rank events; always the fast path."""

MAX_SIMULATED_BYTES = 2**40
"""Largest message a simulation accepts, bytes (1 TiB): beyond any device's memory."""

MAX_REAL_RANKS = 64
"""Ranks a run on this machine may start (each is a Python process with PyTorch loaded)."""

RANK_BASE_BYTES = 320 * 2**20
"""Resident memory of one rank before its buffers, bytes (PyTorch and a gloo group: about
280 MiB measured with ``/proc/self/status``, rounded up)."""

BUFFERS_PER_RANK = 4
"""Message-sized buffers a rank of a real twin holds at once (input, output, a scratch piece
and the built-in collective's copy), an upper estimate."""

MAX_REPEATS = 10_000
"""Timed repeats per point a run accepts."""


def available_memory_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo``, bytes (``None`` where there is none)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def min_message_bytes(twin: Any, world: int) -> int:
    """The smallest ``n`` the twin moves something for: one element, or one per rank where the
    buffer is cut into p pieces (:func:`lab.twins_collectives.effective_nbytes`)."""
    from lab.twins_collectives import PIECEWISE

    per = world if twin.operation in PIECEWISE else 1
    return int(twin.itemsize) * per


def check_sweep(twin: Any, worlds: Sequence[int], sizes: Sequence[int], real: bool,
                engine: str = "events") -> None:
    """Sizes and worlds a twin can take: each size at least one element per piece and, for a
    simulation, at most :data:`MAX_SIMULATED_BYTES`; each world within what ``engine`` takes
    (:func:`check_engine_world`), or for a real run (``real``) what this machine can hold."""
    for world in worlds:
        if world < twin.min_world:
            raise UsageError(f"{twin.name} needs a world of at least {twin.min_world} ranks, "
                             f"got {world}")
        if not real:  # a real run's own limit, check_real_ranks, is far lower
            check_engine_world(twin.name, world, engine)
        least = min_message_bytes(twin, world)
        for nbytes in sizes:
            if nbytes < least:
                unit = "float32 element" if twin.itemsize == 4 else "byte"
                piece = " per rank" if least > twin.itemsize else ""
                raise UsageError(f"invalid size {nbytes} B for {twin.name} with {world} ranks: "
                                 f"it moves at least one {unit}{piece} ({least} B)")
    for nbytes in sizes:
        if nbytes > MAX_SIMULATED_BYTES:
            raise UsageError(f"invalid size {format_size(nbytes)}: at most "
                             f"{format_size(MAX_SIMULATED_BYTES)} per message")
    if real:
        check_real_ranks(worlds, max(sizes, default=0))


def check_simulated_world(world: int, flag: str) -> None:
    """At most :data:`MAX_SIMULATED_RANKS` simulated ranks."""
    if world > MAX_SIMULATED_RANKS:
        raise UsageError(f"invalid {flag} {world}: the simulator takes at most "
                         f"{MAX_SIMULATED_RANKS} ranks")


def check_engine_world(name: str, world: int, engine: str, flag: str = "--world") -> None:
    """What ``--engine`` takes for twin ``name``: ``fast`` only for a twin with a fast path;
    up to :data:`MAX_FAST_RANKS` ranks where a fast path may be taken, else up to
    :data:`MAX_SIMULATED_RANKS` (the refusal names ``--engine auto`` where it would help)."""
    from simulator.collectives.fast import FAST_PATHS

    if engine not in ENGINES:
        raise UsageError(f"invalid --engine {engine!r}: choose {', '.join(ENGINES)}")
    has_fast = name in FAST_PATHS
    if engine == "fast" and not has_fast:
        raise UsageError(f"--engine fast: {name} has no exact fast path; these twins have one: "
                         f"{', '.join(sorted(FAST_PATHS))}")
    if has_fast and engine != "events":
        if world > MAX_FAST_RANKS:
            raise UsageError(f"invalid {flag} {world}: the fast path of {name} takes at most "
                             f"{MAX_FAST_RANKS} ranks")
        return
    if world > MAX_SIMULATED_RANKS:
        hint = (f"; {name} has an exact fast path up to {MAX_FAST_RANKS} ranks: use --engine "
                f"auto or fast" if has_fast else "")
        raise UsageError(f"invalid {flag} {world}: the event engine simulates at most "
                         f"{MAX_SIMULATED_RANKS} ranks{hint}")


def check_fast_found(name: str, world: int, engine: str, found: bool, cluster: str) -> None:
    """After the cluster is built: ``--engine fast`` needs a fast path exact on it, and a
    world above :data:`MAX_SIMULATED_RANKS` needs one with ``auto``."""
    if found or engine == "events":
        return
    why = (f"{name} has no exact fast path on cluster {cluster} at {world} ranks (host effects, "
           f"or links its messages share)")
    if engine == "fast":
        raise UsageError(f"--engine fast: {why}; use --engine auto or events")
    if world > MAX_SIMULATED_RANKS:
        raise UsageError(f"invalid --world {world}: {why}, and the event engine simulates at "
                         f"most {MAX_SIMULATED_RANKS} ranks")


def check_real_ranks(worlds: Sequence[int], nbytes: int = 0) -> None:
    """Real ranks this machine can hold: at most :data:`MAX_REAL_RANKS`, and their estimated
    memory (:data:`RANK_BASE_BYTES` plus :data:`BUFFERS_PER_RANK` messages each) within what
    the kernel reports available."""
    world = max(worlds, default=1)
    if world > MAX_REAL_RANKS:
        raise UsageError(f"invalid world {world}: a run on this machine starts at most "
                         f"{MAX_REAL_RANKS} ranks (simulate larger worlds)")
    need = world * (RANK_BASE_BYTES + BUFFERS_PER_RANK * nbytes)
    free = available_memory_bytes()
    if free is not None and need > free:
        raise UsageError(f"{world} ranks with {format_size(nbytes)} messages need about "
                         f"{format_size(need)} of memory; this machine has "
                         f"{format_size(free)} available")


def check_repeats(repeats: int) -> None:
    """1 to :data:`MAX_REPEATS` timed repeats."""
    if not 1 <= repeats <= MAX_REPEATS:
        raise UsageError(f"invalid --repeats {repeats}: must be from 1 to {MAX_REPEATS}")


def check_backend(backend: str, world: int) -> None:
    """NCCL needs one CUDA GPU per rank; gloo runs anywhere."""
    if backend != "nccl":
        return
    gpus = 0
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) != "":
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < world:
        raise UsageError(f"--backend nccl needs one CUDA GPU per rank ({world}); this machine "
                         f"has {gpus}: use --backend gloo")


def check_network(args: Any, worlds: Sequence[int], machine: bool = True
             ) -> tuple[str, str | None]:
    """``--network``/``--bandwidth``, checked: bad values and a machine that cannot shape
    links are one line each (exit status 2)."""
    from simulator.core.shaped import NETWORKS, parse_bandwidths

    network, bandwidth = args.network, args.bandwidth
    if network not in NETWORKS:
        raise UsageError(f"invalid --network {network!r}: choose loopback or shaped")
    if network == "loopback":
        if bandwidth is not None:
            raise UsageError("--bandwidth needs --network shaped")
        return network, None
    bandwidth = bandwidth or "1gbit"
    try:
        for world in worlds:
            parse_bandwidths(bandwidth, world)
    except ValueError as exc:
        raise UsageError(f"invalid --bandwidth: {exc}") from None
    if not machine:  # a prediction needs the calibration only, not root
        return network, bandwidth
    if getattr(args, "backend", "gloo") != "gloo":
        raise UsageError("--network shaped runs gloo ranks (CPU processes): use --backend gloo")
    from backends.shaped import missing

    why = missing()
    if why:
        raise UsageError(f"cannot use --network shaped: {why}")
    return network, bandwidth


def check_cluster(name: str) -> None:
    """``--cluster``: ``local``, a preset's name, or a cluster file that reads
    (:func:`simulator.core.cluster_file.load`); else one line."""
    from simulator.core.cluster_file import is_cluster_file, load
    from simulator.core.hardware import PRESETS

    if is_cluster_file(name):
        try:
            load(name)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    elif name != "local" and name not in PRESETS:
        raise UsageError(f"unknown cluster {name!r}; choose local, one of "
                         f"{', '.join(sorted(PRESETS))}, or a cluster file (.json)")

