"""Launching ranks: one process per rank, a process group each, nothing left behind.

``spawn(fn, world_size, *args)`` is this project's ``torch.multiprocessing.spawn``: it starts
one process per rank, gives each a process group with a short timeout, calls ``fn(*args)`` in
every rank and returns the list of per-rank return values. Rank functions ask
``torch.distributed`` who they are (``dist.get_rank()``), so the very same functions also run
under ``torchrun``, which is how a user goes beyond one machine::

    torchrun --standalone --nproc-per-node 2 -m backends.launch \\
        backends.collectives.point_to_point:ping_pong_demo 1048576

Rendezvous (book ch. 5, "Store and TCPStore"): the parent itself hosts the ``TCPStore`` on a
port the operating system picks, so two launches never race for a port, and on loopback only
(:mod:`backends.rendezvous`: the store has no password); each child joins the store as a client
and builds its process group on it, its gloo pairs bound to ``lo`` as well.

Failure handling — the launcher never hangs and never leaves orphans:

* a rank whose function raises reports the exception and traceback; the parent stops every
  other rank and raises :class:`RankError` naming the rank;
* a rank that exits without reporting (``os._exit``, a crash, the OOM killer, gloo's abort) is
  noticed by the parent within a fraction of a second and named, with the last line it wrote
  to stderr; a rank blocked in its function is named, not the peers that gave up waiting for
  it (:mod:`backends.launch_faults`);
* process groups carry a short timeout, and the whole launch an optional deadline;
* every child is reaped (terminated, then killed), on SIGTERM too; ranks exit by themselves when
  the launcher dies, even of SIGKILL, and the fork server and resource tracker follow them
  (:mod:`backends.lifeline`).
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from backends.launch_faults import RankError as RankError  # raised by spawn, imported from here
from backends.launch_faults import StderrTap, collect, redirect_stderr
from backends.lifeline import InheritedFd, Lifeline, hold_lifeline, sigterm_unwinds

DEFAULT_TIMEOUT_S = 30.0
"""Process-group timeout, s: a collective waiting longer than this fails instead of hanging."""

RANK_SCHED_ENV = "DISTML_RANK_SCHED"
"""Environment variable choosing the ranks' Linux scheduling policy: ``batch`` (the default)
or ``normal`` (the kernel's default, ``SCHED_OTHER``); see :func:`apply_rank_sched`."""
RANK_SCHED_POLICIES = ("batch", "normal")


def resolve_backend(backend: str = "auto") -> str:
    """``auto`` means NCCL when CUDA GPUs are visible, else gloo."""
    if backend != "auto":
        return backend
    import torch

    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > 0 else "gloo"


@contextmanager
def temporary_env(changes: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for ``None``, remove) environment variables inside a ``with`` block only."""
    saved = {k: os.environ.get(k) for k in changes}
    try:
        _set_env(changes)
        yield
    finally:
        _set_env(saved)


def _set_env(values: Mapping[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def rank_sched_policy(environ: Mapping[str, str] | None = None) -> str:
    """The ranks' scheduling policy named by :data:`RANK_SCHED_ENV` (``batch`` if unset).

    Raises:
        ValueError: for any other value, in one line.
    """
    value = (os.environ if environ is None else environ).get(RANK_SCHED_ENV, "") or "batch"
    policy = value.strip().lower()
    if policy not in RANK_SCHED_POLICIES:
        raise ValueError(f"{RANK_SCHED_ENV}={value!r} is not a scheduling policy; "
                         f"choose {' or '.join(RANK_SCHED_POLICIES)}")
    return policy


def apply_rank_sched() -> str:
    """Give this rank the policy of :func:`rank_sched_policy`; call it before the process
    group starts its threads (they inherit the policy). Returns the policy.

    ``batch`` is Linux's ``SCHED_BATCH``: the rank's threads share the cores exactly as
    before, but a thread that wakes up does not preempt the one running. That removes a
    livelock of gloo on hosts with fewer cores than threads (traced in chapter 2, "The
    four-millisecond stall"): a rank's main thread writes a message while holding its
    connection's lock, the write wakes the receiving rank's I/O thread, which preempts the
    writer on its own core, finds the lock of *its* connection taken by *its* main thread —
    itself preempted the same way — and spins on a level-triggered ``epoll`` until the next
    scheduler tick (4 ms at 250 Hz). ``normal`` keeps the kernel's default, stall included.
    Elsewhere than on Linux nothing changes.
    """
    policy = rank_sched_policy()
    if policy == "batch" and hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except OSError:  # a sandbox that forbids it: the rank runs as it was started
            return current_rank_sched()
    return policy


def current_rank_sched() -> str:
    """The policy this thread runs under, ``batch`` or ``normal`` (any other policy, or a
    platform without the call, counts as ``normal``)."""
    if hasattr(os, "sched_getscheduler") and os.sched_getscheduler(0) == os.SCHED_BATCH:
        return "batch"
    return "normal"


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no orphans)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
        except OSError:
            pass


PRELOAD = ("torch", "torch.distributed", "torch._dynamo", "numpy", "backends.forkserver_exit")
"""Modules the fork server imports once, so that a rank starts with them loaded (``torch._dynamo``:
a rank's first optimizer imports it, 1.5–2.3 s of CPU; :mod:`backends.forkserver_exit`: so that
the server removes its socket's folder as it exits)."""


def rank_context() -> Any:
    """The ``multiprocessing`` context ranks are started from: a *fork server* that imported
    :data:`PRELOAD` once, where the platform has one (Linux), else ``spawn``.

    A spawned rank is a fresh interpreter that imports torch again — two to three seconds of
    CPU each, and four ranks on two cores wait for one another's imports. A rank forked from
    the server starts with torch loaded, in milliseconds, yet from a clean process: the server
    is its own interpreter (started once, on first use, by ``multiprocessing``), single-threaded,
    that never ran a rank. It lives as long as this process and exits with it; its ranks still
    die with their parent (:func:`_die_with_parent`). Like ``spawn``, each rank gets this
    process's ``sys.path`` and working directory; its environment is passed explicitly
    (:func:`_rank_main`), since a forked rank would otherwise inherit the server's."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def _adopt_environment(environ: Mapping[str, str]) -> None:
    """Make this rank's environment ``environ`` (the launcher's, with the rank's settings),
    and its intra-op threads what ``OMP_NUM_THREADS`` asks: torch was imported by the fork
    server, under the server's environment."""
    os.environ.clear()
    os.environ.update(environ)
    threads = environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0 and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))


@dataclass
class RankLinks:
    """What ties a rank to its launcher: the queue it reports on, its end of the launcher's
    :class:`~backends.lifeline.Lifeline`, and the file its stderr goes to
    (:class:`~backends.launch_faults.StderrTap`)."""

    results: Any
    lifeline: InheritedFd
    stderr: InheritedFd


def _rank_main(fn: Callable[..., Any], args: tuple[Any, ...], rank: int, world_size: int,
               backend: str, host: str, port: int, timeout_s: float, links: RankLinks,
               environ: Mapping[str, str] | None = None) -> None:
    """Body of a rank forked by the fork server: die with the server (:func:`_die_with_parent`)
    as well as with the launcher, then :func:`run_rank`."""
    _die_with_parent()
    run_rank(fn, args, rank, world_size, backend, host, port, timeout_s, links, environ)


def run_rank(fn: Callable[..., Any], args: tuple[Any, ...], rank: int, world_size: int,
             backend: str, host: str, port: int, timeout_s: float, links: RankLinks,
             environ: Mapping[str, str] | None = None,
             on_orphaned: Callable[[], None] | None = None) -> None:
    """Body of one rank: exit when the launcher dies (after ``on_orphaned``), write stderr to
    the launcher's tap, take the launcher's environment (``environ``; ``None``: keep the
    inherited one), join the store, build the group, run ``fn``, report.

    Reports on ``links.results``: ``done`` when ``fn`` returned and the rank enters the final
    barrier, then ``ok`` with the value, or ``error`` with the message and traceback. A failing
    rank reports *before* it tears its group down — the teardown is how its peers learn of the
    failure — so that the culprit's report is on its way before its victims'."""
    redirect_stderr(links.stderr)
    try:
        if environ is not None:
            _adopt_environment(environ)
        apply_rank_sched()  # before any thread starts: threads inherit the policy
        hold_lifeline(links.lifeline, on_orphaned)
        import torch.distributed as dist

        if backend == "nccl":
            import torch

            torch.cuda.set_device(rank % torch.cuda.device_count())
        timeout = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore(  # type: ignore[attr-defined]
            host, port, world_size, is_master=False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=timeout)
        value = fn(*args)
        links.results.put((rank, "done", None, ""))  # a timeout from here on is a peer's
        # Meet before tearing down: a rank that finished at once must not close its
        # connections while a slower rank is still connecting to it.
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:  # report everything, even KeyboardInterrupt
        links.results.put((rank, "error", f"{type(exc).__name__}: {exc}",
                           traceback.format_exc()))
        group = sys.modules.get("torch.distributed")  # None: it failed before the import
        if group is not None and group.is_initialized():
            with contextlib.suppress(Exception):
                group.destroy_process_group()
        sys.exit(1)
    links.results.put((rank, "ok", value, ""))


def spawn(fn: Callable[..., Any], world_size: int, *args: Any, backend: str = "auto",
          timeout: float = DEFAULT_TIMEOUT_S, deadline: float | None = None,
          env: dict[str, str] | None = None, network: str = "loopback",
          bandwidth: str | Sequence[str | int] | None = None) -> list[Any]:
    """Run ``fn(*args)`` in ``world_size`` new processes, one per rank; return their values.

    Args:
        fn: a module-level function (it is pickled by name); it finds its rank with
            ``torch.distributed.get_rank()``.
        world_size: number of ranks, at least 1.
        backend: ``gloo``, ``nccl`` or ``auto`` (NCCL if GPUs are visible).
        timeout: process-group timeout, s.
        deadline: give up on the whole launch after this many seconds (``None``: no limit).
        env: extra environment variables for the children (``OMP_NUM_THREADS`` defaults to 1
            so ranks sharing cores do not oversubscribe them, as ``torchrun`` does; each rank
            runs under the scheduling policy :data:`RANK_SCHED_ENV` names, see
            :func:`apply_rank_sched`).
        network: ``loopback`` (the host's own network) or ``shaped``: every rank in its own
            network namespace on a rate-limited link (:mod:`backends.shaped`; needs root).
        bandwidth: the shaped links' line rate, ``"1gbit"`` or one per rank
            (``"1gbit,1gbit,100mbit"``); only with ``network="shaped"``.

    Returns:
        The return value of each rank, indexed by rank.

    Raises:
        RankError: naming the first rank that failed, with its traceback.
        ValueError: for a world size below 1, or an unknown :data:`RANK_SCHED_ENV` policy.
    """
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    rank_sched_policy({**os.environ, **(env or {})})  # a bad policy fails here, not in a rank
    from backends.torchrun import attached, run_in_place

    if attached():  # torchrun started the ranks: this process is one of them
        return run_in_place(fn, world_size, args, env or {})
    if network == "shaped":
        from backends.shaped import spawn_shaped

        return spawn_shaped(fn, world_size, *args, bandwidth=bandwidth or "1gbit",
                            backend=backend, timeout=timeout, deadline=deadline, env=env)
    if network != "loopback" or bandwidth is not None:
        raise ValueError(f"unknown network {network!r}; choose loopback or shaped (a "
                         "bandwidth needs network='shaped')")
    from backends.rendezvous import LOOPBACK, loopback_interfaces, master_store

    backend = resolve_backend(backend)
    host = LOOPBACK  # the store, gloo's pairs and RPC's agents listen on loopback only
    store = master_store(world_size, timeout, host)
    child_env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
                 **loopback_interfaces(), **(env or {})}
    environ = {**os.environ, **child_env}
    port = store.port

    def rank_args(rank: int, links: RankLinks) -> tuple[Any, ...]:
        return (fn, args, rank, world_size, backend, host, port, timeout, links, environ)

    try:
        # a fork server started now inherits the ranks' settings
        return run_ranks(rank_context(), _rank_main, rank_args, world_size, deadline, child_env)
    finally:
        del store


def run_ranks(ctx: Any, target: Callable[..., None],
              rank_args: Callable[[int, RankLinks], tuple[Any, ...]], world_size: int,
              deadline: float | None, child_env: Mapping[str, str | None],
              grace_s: float = 3.0) -> list[Any]:
    """Start ``target(*rank_args(rank, links))`` in one process per rank (from ``ctx``, under
    ``child_env``), collect their values (:func:`backends.launch_faults.collect`), and reap
    them however this ends: a value, a :class:`RankError`, Ctrl-C or SIGTERM. After a success
    the ranks get ``grace_s`` to exit by themselves; after a failure or a signal they are
    stopped at once (a rank blocked in its function, or waiting for a peer that failed, would
    only time out)."""
    results = ctx.Queue()
    lifeline, tap = Lifeline(), StderrTap(world_size)
    procs: list[Any] = []
    succeeded = False
    with sigterm_unwinds():
        try:
            with temporary_env(child_env):
                for rank in range(world_size):
                    links = RankLinks(results, lifeline.rank_end, tap.rank_end(rank))
                    proc = ctx.Process(target=target, name=f"distml-rank{rank}", daemon=True,
                                       args=rank_args(rank, links))
                    proc.start()
                    procs.append(proc)  # started: only those can be reaped
            values, succeeded = collect(procs, results, deadline, tap), True
            return values
        finally:
            try:
                reap(procs, grace_s if succeeded else 0.0)
            finally:
                tap.close()
                lifeline.close()
                results.close()


def reap(procs: list[Any], grace_s: float = 3.0) -> None:
    """Wait briefly for children to exit, then terminate, then kill; join them all."""
    end = time.monotonic() + grace_s
    for proc in procs:
        proc.join(timeout=max(0.0, end - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=2.0)
        if proc.is_alive():
            proc.kill()
            proc.join()


if __name__ == "__main__":  # torchrun ... -m backends.launch MODULE:FUNCTION [ARG ...]
    from backends.torchrun import torchrun_main

    torchrun_main()
