"""The lab's rank functions on ranks that ``torchrun`` started, on one machine or many.

:func:`backends.launch.spawn` normally starts one process per rank itself. Beyond one machine
the processes come from a launcher instead: ``torchrun --nnodes N --nproc-per-node G`` starts
``G`` ranks on each of ``N`` machines, which meet through its c10d rendezvous and get
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``. A process that
has called :func:`attach` is such a rank: from then on ``spawn(fn, world, *args)`` does not
start anything — it runs ``fn(*args)`` right here, as this rank of torchrun's world, and
returns every rank's value (gathered with ``all_gather_object``), exactly what the
self-launched ranks would have returned. So every measurement of the lab, written once for
``spawn``, also runs across machines (``python -m lab.run``).

Two entry points:

* :func:`torchrun_main` — ``torchrun ... -m backends.launch MODULE:FUNCTION [ARG ...]``: one
  rank function, each rank printing its value;
* :func:`attach` / :func:`detach` — for a driver program (``lab.run``) that calls ``spawn``
  through the lab's measurement code.

A measurement needs as many processes as it asks ``spawn`` for; asking for another number
while attached is a one-line :class:`ValueError` naming both (torchrun's world is fixed when it
starts).
"""

from __future__ import annotations

import datetime
import importlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from backends.launch import DEFAULT_TIMEOUT_S, apply_rank_sched, resolve_backend, temporary_env

_attached = False
_launches = 0


def init_from_env(timeout: float = DEFAULT_TIMEOUT_S, backend: str = "auto") -> None:
    """Initialise the default process group from torchrun's environment, with a short timeout
    (s); NCCL ranks take ``cuda:LOCAL_RANK``."""
    import torch.distributed as dist

    if not dist.is_initialized():
        apply_rank_sched()
        backend = resolve_backend(backend)
        if backend == "nccl":
            import torch

            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))


def attach(timeout: float = DEFAULT_TIMEOUT_S, backend: str = "auto") -> int:
    """Join torchrun's world and make :func:`backends.launch.spawn` run in place.

    Returns:
        The world size torchrun started (``WORLD_SIZE``).

    Raises:
        RuntimeError: this process was not started by torchrun (no ``WORLD_SIZE``/``RANK``).
    """
    global _attached
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        raise RuntimeError("not started by torchrun: RANK and WORLD_SIZE are not set")
    import torch.distributed as dist

    init_from_env(timeout, backend)
    _attached = True
    return dist.get_world_size()


def attached() -> bool:
    """Whether this process is a rank of torchrun's world that :func:`attach` joined."""
    return _attached


def detach() -> None:
    """Leave torchrun's world (destroy the process group); ``spawn`` starts processes again."""
    global _attached
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    _attached = False


def launches() -> int:
    """How many ``spawn`` calls have run on torchrun's ranks in this process: a measurement
    that made none ran in each rank alone, not on the world."""
    return _launches


def run_in_place(fn: Callable[..., Any], world_size: int, args: tuple[Any, ...],
                 env: Mapping[str, str]) -> list[Any]:
    """``spawn(fn, world_size, *args, env=env)`` on an attached rank: ``fn`` runs here, under
    ``env``, and every rank's value comes back, indexed by rank.

    Raises:
        ValueError: ``world_size`` is not torchrun's world size.
    """
    import torch.distributed as dist

    global _launches
    world = dist.get_world_size()
    if world_size != world:
        raise ValueError(f"this measurement needs {world_size} processes, but torchrun "
                         f"started {world} (--nnodes × --nproc-per-node)")
    _launches += 1
    with temporary_env(dict(env)):
        value = fn(*args)
    values: list[Any] = [None] * world
    dist.all_gather_object(values, value)
    return values


def cluster_layout() -> dict[str, Any]:
    """Where torchrun's ranks run (a collective call: every rank calls it): ``nodes`` (agents,
    ``GROUP_RANK``), ``ranks_per_node`` (``LOCAL_WORLD_SIZE``) and, per rank, its node, host
    and local rank."""
    import socket

    import torch.distributed as dist

    mine = {"rank": dist.get_rank(), "node": int(os.environ.get("GROUP_RANK", "0")),
            "host": socket.gethostname(), "local_rank": int(os.environ.get("LOCAL_RANK", "0"))}
    ranks: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, mine)
    return {"nodes": len({r["node"] for r in ranks}), "world": len(ranks),
            "ranks_per_node": int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
            "backend": str(dist.get_backend()), "ranks": ranks}


def _load(target: str) -> Callable[..., Any]:
    module, _, name = target.partition(":")
    if not name:
        raise SystemExit(f"error: expected MODULE:FUNCTION, got {target!r}")
    fn = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise SystemExit(f"error: {module} has no function {name!r}")
    return fn  # type: ignore[no-any-return]


def torchrun_main(argv: list[str] | None = None) -> None:
    """``torchrun ... -m backends.launch MODULE:FUNCTION [ARG ...]``: run one rank function.

    Integer-looking arguments are passed as ints. Each rank prints ``rank R: <return value>``.
    """
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        raise SystemExit("usage: torchrun ... -m backends.launch MODULE:FUNCTION [ARG ...]")
    import torch.distributed as dist

    fn = _load(argv[0])
    args = [int(a) if a.lstrip("-").isdigit() else a for a in argv[1:]]
    init_from_env()
    try:
        value = fn(*args)
        # one write per line, so the ranks' lines do not interleave on a shared terminal
        sys.stdout.write(f"rank {dist.get_rank()}: {value}\n")
        sys.stdout.flush()
    finally:
        dist.destroy_process_group()
