"""Horovod's process-wide state: ``init``, ``shutdown``, ranks and sizes, settings.

Book chapter 7, "From the user's view" and "The Gloo implementation"; Sergeev & Del Balso
(2018). Re-implemented after reading Horovod's ``horovod/common/basics.py``,
``horovod/common/operations.cc`` (``InitializeHorovodOnce``, the settings read in
``BackgroundThreadLoop``) and ``horovod/common/utils/env_parser.cc``; no code is taken from them.

Where the world comes from (in this order):

1. ``torch.distributed`` is already initialised (our :func:`backends.launch.spawn`, torchrun):
   Horovod's world is that world, or the ranks listed in ``init(comm=[...])``;
2. otherwise the environment ``horovodrun`` sets (:mod:`backends.horovod.runner`):
   ``HOROVOD_RANK``, ``HOROVOD_SIZE``, ``HOROVOD_LOCAL_RANK``, ``HOROVOD_LOCAL_SIZE``,
   ``HOROVOD_CROSS_RANK``, ``HOROVOD_CROSS_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``: a gloo
   group is built on a TCP store hosted by rank 0 (listening on ``MASTER_ADDR`` only,
   :mod:`backends.rendezvous`), with the lab's short timeout;
3. otherwise the environment ``torchrun`` sets (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
   ``MASTER_PORT``; torchrun's agent hosts the store): Horovod's world is torchrun's — the
   "ssh-less" way to run a Horovod script on several machines, one ``torchrun`` per node;
4. otherwise a world of one process — but only if no launcher says otherwise: where MPI,
   PMI or Slurm announce a world of several processes (``OMPI_COMM_WORLD_SIZE``,
   ``PMI_SIZE``, ``SLURM_NTASKS``) without one of the environments above, ``init`` refuses in
   one line rather than train one separate copy per process.

Either way ``init`` builds two gloo groups of its own over Horovod's ranks, on the world's
store: the *data* group for the collectives on tensors and the *control* group for the
negotiation; only the background thread uses them, so the main thread stays free to use
``torch.distributed``'s groups. If
``HOROVOD_DRIVER_ADDR`` is set, ``init`` tells ``horovodrun``'s driver that this task is up
(:func:`backends.horovod.task_service.notify_driver`).

Settings (an argument of ``init`` wins over the environment, which wins over the default):

==========================================  ======================  ========================
setting                                     environment             default
==========================================  ======================  ========================
cycle time, ms                              HOROVOD_CYCLE_TIME      1 (Horovod's)
fusion threshold, bytes                     HOROVOD_FUSION_THRESHOLD 128 MiB (Horovod's)
response-cache capacity, entries            HOROVOD_CACHE_CAPACITY  1024 (Horovod's)
stall warning, s                            HOROVOD_STALL_CHECK_TIME_SECONDS   5 (Horovod: 60)
stall error, s (0: never)                   HOROVOD_STALL_SHUTDOWN_TIME_SECONDS 30 (Horovod: 0)
timeline file (rank 0 writes it at exit)    HOROVOD_TIMELINE        none
==========================================  ======================  ========================

The stall times are shorter than Horovod's so that a mistake in the lab shows within seconds
instead of hanging; a stall error fails the stalled handles rather than the whole job.
"""

from __future__ import annotations

import atexit
import datetime
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backends.launch import DEFAULT_TIMEOUT_S, apply_rank_sched
from backends.rendezvous import master_addr, master_store

DEFAULT_CYCLE_TIME_MS = 1.0
"""Horovod's current default cycle time (early releases: 5 ms), ms."""
DEFAULT_FUSION_THRESHOLD_BYTES = 128 * 1024 * 1024
"""Horovod's current default fusion threshold (early releases: 64 MiB), bytes."""
DEFAULT_CACHE_CAPACITY = 1024
"""Horovod's default response-cache capacity, entries."""
DEFAULT_STALL_CHECK_S = 5.0
"""The lab's stall-warning time, s (Horovod: 60)."""
DEFAULT_STALL_SHUTDOWN_S = 30.0
"""The lab's stall-error time, s (Horovod: 0, never)."""


@dataclass(frozen=True)
class Settings:
    """The background thread's settings (units in the names)."""

    cycle_time_ms: float = DEFAULT_CYCLE_TIME_MS
    fusion_threshold_bytes: int = DEFAULT_FUSION_THRESHOLD_BYTES
    cache_capacity: int = DEFAULT_CACHE_CAPACITY
    stall_check_s: float = DEFAULT_STALL_CHECK_S
    stall_shutdown_s: float = DEFAULT_STALL_SHUTDOWN_S
    timeline: str | None = None


def _number(value: Any, what: str, integer: bool) -> float:
    text = str(value).strip()
    try:
        number = int(text) if integer else float(text)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise ValueError(f"{what} must be {kind}, got {value!r}") from None
    if number != number or number < 0 or number == float("inf"):
        raise ValueError(f"{what} must be a finite number >= 0, got {value!r}")
    return number


def read_settings(env: Mapping[str, str] | None = None, *, cycle_time_ms: float | None = None,
                  fusion_threshold_bytes: int | None = None, cache_capacity: int | None = None,
                  stall_check_time_s: float | None = None,
                  stall_shutdown_time_s: float | None = None,
                  timeline: str | None = None) -> Settings:
    """Settings from arguments, else ``env`` (default ``os.environ``), else the defaults.

    Raises:
        ValueError: a negative, non-numeric or non-finite value, in one line naming it.
    """
    env = os.environ if env is None else env

    def pick(arg: Any, name: str, default: float, what: str, integer: bool) -> float:
        if arg is not None:
            return _number(arg, what, integer)
        if env.get(name, "").strip():
            return _number(env[name], f"{name} ({what})", integer)
        return default

    return Settings(
        cycle_time_ms=pick(cycle_time_ms, "HOROVOD_CYCLE_TIME", DEFAULT_CYCLE_TIME_MS,
                           "the cycle time in milliseconds", False),
        fusion_threshold_bytes=int(pick(fusion_threshold_bytes, "HOROVOD_FUSION_THRESHOLD",
                                        DEFAULT_FUSION_THRESHOLD_BYTES,
                                        "the fusion threshold in bytes", True)),
        cache_capacity=int(pick(cache_capacity, "HOROVOD_CACHE_CAPACITY",
                                DEFAULT_CACHE_CAPACITY, "the response-cache capacity", True)),
        stall_check_s=pick(stall_check_time_s, "HOROVOD_STALL_CHECK_TIME_SECONDS",
                           DEFAULT_STALL_CHECK_S, "the stall-warning time in seconds", False),
        stall_shutdown_s=pick(stall_shutdown_time_s, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
                              DEFAULT_STALL_SHUTDOWN_S, "the stall-error time in seconds",
                              False),
        timeline=timeline if timeline is not None else (env.get("HOROVOD_TIMELINE") or None),
    )


@dataclass
class _State:
    rank: int
    size: int
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int
    ranks: list[int]
    settings: Settings
    engine: Any  # backends.horovod.background.Engine
    groups: list[Any]
    owns_default_group: bool


_state: _State | None = None
_exit_hook: list[bool] = []


def _require() -> _State:
    if _state is None:
        raise ValueError("Horovod has not been initialized; call hvd.init() first")
    return _state


def _env_int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except KeyError:
        raise ValueError(f"{name} is not set (horovodrun sets it for every task)") from None
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {env[name]!r}") from None


OTHER_LAUNCHERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
"""Variables by which MPI (Open MPI), PMI (MPICH, Intel MPI) and Slurm tell a process how
many processes were started with it."""


def _env_world(env: Any, name: str) -> int:
    """The world size a launcher's variable states (1 when unset or unreadable)."""
    try:
        return int(env.get(name, "1"))
    except ValueError:
        return 1


def _init_default_group(timeout_s: float) -> bool:
    """Initialise torch.distributed from horovodrun's or torchrun's environment (or a
    world of one; see the module docstring for the order).

    Returns True if a group was created here (and must be destroyed at shutdown)."""
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    env = os.environ
    timeout = datetime.timedelta(seconds=timeout_s)
    if "HOROVOD_RANK" not in env:
        if _env_world(env, "WORLD_SIZE") > 1:  # torchrun: its agent's store, its world
            apply_rank_sched()
            dist.init_process_group("gloo", init_method="env://", timeout=timeout)
            return True
        for name in OTHER_LAUNCHERS:
            if _env_world(env, name) > 1:
                raise ValueError(
                    f"hvd.init(): {name}={env[name]} says this process is one of several, but "
                    "the environment Horovod needs is missing; start the script with the lab's "
                    "horovodrun (python -m backends.horovod.runner) or torchrun, or call "
                    "torch.distributed.init_process_group before hvd.init()")
        dist.init_process_group("gloo", store=dist.HashStore(),  # type: ignore[attr-defined]
                                rank=0, world_size=1, timeout=timeout)
        return True
    rank, size = _env_int(env, "HOROVOD_RANK"), _env_int(env, "HOROVOD_SIZE")
    if not 0 <= rank < size:
        raise ValueError(f"HOROVOD_RANK={rank} is not within HOROVOD_SIZE={size}")
    addr = master_addr(env)
    port = _env_int(env, "MASTER_PORT")
    apply_rank_sched()  # a task of horovodrun is a rank: the launcher's policy (before threads)
    if rank == 0:  # rank 0 hosts the store, listening on MASTER_ADDR only
        store = master_store(size, timeout_s, addr, port, wait_for_workers=True)
    else:
        store = dist.TCPStore(addr, port, size, is_master=False,  # type: ignore[attr-defined]
                              timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size, timeout=timeout)
    return True


_generation: dict[tuple[int, ...], int] = {}
"""How many times this process has built Horovod's groups over each set of ranks."""


def _gloo_groups(ranks: list[int], rank: int, timeout_s: float) -> tuple[Any, Any]:
    """Horovod's own data and control gloo groups over ``ranks``, rendezvous on the default
    store under a fresh prefix (as Horovod builds its Gloo contexts from its rendezvous
    server). Only the members take part, and ``torch.distributed``'s registry of groups is
    left alone, so the main thread's groups are unaffected."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _get_default_store

    key = tuple(ranks)
    _generation[key] = _generation.get(key, 0) + 1
    base = f"horovod/{'_'.join(map(str, ranks))}/{_generation[key]}"
    store = _get_default_store()
    timeout = datetime.timedelta(seconds=timeout_s)
    return tuple(  # type: ignore[return-value]
        dist.ProcessGroupGloo(dist.PrefixStore(f"{base}/{role}/", store),  # type: ignore[attr-defined]
                              rank, len(ranks), timeout)
        for role in ("data", "control"))


def init(comm: Sequence[int] | None = None, *, cycle_time_ms: float | None = None,
         fusion_threshold_bytes: int | None = None, cache_capacity: int | None = None,
         stall_check_time_s: float | None = None, stall_shutdown_time_s: float | None = None,
         timeline: bool | str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Start Horovod in this process: join the world, start the background thread.

    Args:
        comm: the ``torch.distributed`` ranks that form Horovod's world, in Horovod rank order
            (``None``: all). Only those ranks call ``init``.
        cycle_time_ms: the background thread's cycle time, ms (``HOROVOD_CYCLE_TIME``).
        fusion_threshold_bytes: the fusion threshold, bytes (``HOROVOD_FUSION_THRESHOLD``);
            0 turns fusion off. Rounded up as Horovod does
            (:func:`backends.horovod.fusion.effective_threshold`).
        cache_capacity: response-cache entries (``HOROVOD_CACHE_CAPACITY``); 0 turns it off.
        stall_check_time_s: warn about stalled tensors after this long, s.
        stall_shutdown_time_s: fail stalled tensors' handles after this long, s (0: never).
        timeline: record the background thread's spans (``True``), and write them as a
            Chrome trace to this path at shutdown (a string; rank 0 only).
        timeout_s: timeout of the process groups, s.

    A second call while initialised does nothing, as in Horovod.

    Raises:
        ValueError: a bad setting or environment, in one line.
    """
    global _state
    if _state is not None:
        return
    path = timeline if isinstance(timeline, str) else None
    settings = read_settings(cycle_time_ms=cycle_time_ms,
                             fusion_threshold_bytes=fusion_threshold_bytes,
                             cache_capacity=cache_capacity,
                             stall_check_time_s=stall_check_time_s,
                             stall_shutdown_time_s=stall_shutdown_time_s, timeline=path)
    import torch.distributed as dist

    from backends.horovod.background import Engine
    from backends.horovod.fusion import effective_threshold

    owns = _init_default_group(timeout_s)
    world = dist.get_world_size()
    ranks = list(range(world)) if comm is None else [int(r) for r in comm]
    me = dist.get_rank()
    if not ranks or len(set(ranks)) != len(ranks) or not all(0 <= r < world for r in ranks):
        raise ValueError(f"comm must list distinct ranks of the world 0..{world - 1}, "
                         f"got {list(ranks)}")
    if me not in ranks:
        raise ValueError(f"rank {me} called init(comm={ranks}) but is not in comm")
    rank, size = ranks.index(me), len(ranks)
    env = os.environ
    if owns and "HOROVOD_LOCAL_RANK" in env:
        local_rank, local_size = _env_int(env, "HOROVOD_LOCAL_RANK"), _env_int(
            env, "HOROVOD_LOCAL_SIZE")
        cross_rank = int(env.get("HOROVOD_CROSS_RANK", "0"))
        cross_size = int(env.get("HOROVOD_CROSS_SIZE", "1"))
    else:  # one machine
        local_rank, local_size, cross_rank, cross_size = rank, size, 0, 1
    data, control = _gloo_groups(ranks, rank, timeout_s)
    threshold = effective_threshold(settings.fusion_threshold_bytes, local_size)
    engine = Engine(rank, size, data, control, settings.cycle_time_ms, threshold,
                    settings.cache_capacity, settings.stall_check_s, settings.stall_shutdown_s,
                    trace=bool(timeline) or settings.timeline is not None)
    _state = _State(rank, size, local_rank, local_size, cross_rank, cross_size, ranks, settings,
                    engine, [data, control], owns)
    if not _exit_hook:
        atexit.register(_shutdown_at_exit)
        _exit_hook.append(True)
    if env.get("HOROVOD_DRIVER_ADDR"):
        from backends.horovod.task_service import notify_driver

        notify_driver(rank, size)


def _shutdown_at_exit() -> None:
    """At interpreter exit, as Horovod does; waits briefly, since peers may be gone."""
    shutdown(timeout_s=2.0)


def shutdown(timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Stop the background thread (on every rank: the stop is negotiated) and free the
    groups. Pending handles fail. Safe to call twice or before ``init``.

    Args:
        timeout_s: how long to wait for the background thread to finish, s.
    """
    global _state
    state = _state
    if state is None:
        return
    _state = None
    import torch.distributed as dist

    state.engine.shutdown(timeout_s)
    if state.settings.timeline and state.rank == 0:
        state.engine.tracer.trace.write_chrome(state.settings.timeline, "horovod")
    if state.engine.alive:  # a peer is gone and the thread is stuck: leave it be
        return
    state.groups.clear()  # Horovod's own groups close when no longer referenced
    if state.owns_default_group and dist.is_initialized():
        dist.destroy_process_group()


def is_initialized() -> bool:
    """Whether ``init`` has been called (and not ``shutdown``)."""
    return _state is not None


def rank() -> int:
    """This process's rank in Horovod's world, 0 … size−1."""
    return _require().rank


def size() -> int:
    """Number of processes in Horovod's world."""
    return _require().size


def local_rank() -> int:
    """This process's rank on its machine."""
    return _require().local_rank


def local_size() -> int:
    """Number of processes on this machine."""
    return _require().local_size


def cross_rank() -> int:
    """The index of this machine."""
    return _require().cross_rank


def cross_size() -> int:
    """Number of machines."""
    return _require().cross_size


def settings() -> Settings:
    """The settings in force (the fusion threshold as given, before rounding)."""
    return _require().settings


def engine() -> Any:
    """The background :class:`~backends.horovod.background.Engine` of this process."""
    return _require().engine
