"""``horovodrun`` on one machine: a driver service, ``np`` task processes, nothing left behind.

Horovod's launcher (``horovod/runner/launch.py`` and ``gloo_run.py``; book ch. 7, "horovodrun"
and "Network basics and the Driver/Task services") parses the job, checks the hosts, finds the
common network interfaces with a driver service and one task service per host, then starts one
worker process per slot with its identity in ``HOROVOD_*`` environment variables, forwards each
worker's output with its rank as a prefix, and terminates every worker as soon as one fails.

This module keeps that shape for a single host (``-H localhost:np``):

1. a :class:`DriverService` (a TCP server on a port the operating system picks, signed one-line
   messages, :mod:`backends.horovod.task_service`) listens before any task starts;
2. ``np`` task processes run the user's command, each in its own process group, with
   ``HOROVOD_RANK``/``SIZE``/``LOCAL_RANK``/``LOCAL_SIZE``/``CROSS_RANK``/``CROSS_SIZE``,
   ``MASTER_ADDR``/``MASTER_PORT`` (the rendezvous that ``torch.distributed`` uses, in place of
   Horovod's Gloo rendezvous server), the driver's address and the tuning settings
   (``HOROVOD_CYCLE_TIME`` in ms, ``HOROVOD_FUSION_THRESHOLD`` in bytes);
3. every task registers with the driver from ``hvd.init()``; a task that has not registered
   within the start timeout fails the job, naming its rank;
4. output lines are prefixed ``[rank]<stdout>:`` / ``[rank]<stderr>:`` as Horovod does;
5. a task exiting non-zero, Ctrl-C or SIGTERM terminates every task (SIGTERM to its process group,
   SIGKILL after a grace period); tasks also die with the launcher (``PR_SET_PDEATHSIG``). A
   failure names the task to blame, which is not always the first to exit (:mod:`.blame`).

Going beyond one machine is Horovod's (or ``torchrun``'s) job; the per-host probe of interfaces is
described in the textbook and not reproduced here.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import IO, Any

from backends.horovod.blame import Tails, judge, ranks_text
from backends.horovod.task_service import (
    DRIVER_ADDR_ENV,
    DRIVER_PORT_ENV,
    SECRET_KEY_ENV,
    read_line,
    verify,
)
from backends.launch import rank_sched_policy
from backends.rendezvous import loopback_interfaces

DEFAULT_START_TIMEOUT_S = 30.0
"""Horovod's default start timeout (``--start-timeout``, ``HOROVOD_START_TIMEOUT``), s."""
KILL_GRACE_S = 3.0
"""Time a task gets between SIGTERM and SIGKILL, s."""
POLL_S = 0.05
HOST = "127.0.0.1"


@dataclass
class Registration:
    """One task's "I have come up" message, as the driver received it."""

    rank: int
    pid: int
    host: str
    at_s: float
    """Seconds after the driver started."""


@dataclass
class DriverService:
    """The launcher's service: knows how many tasks to expect and records who registered.

    ``start()`` binds ``127.0.0.1`` on a port the operating system picks (no race between two
    launches) and serves in a thread; ``stop()`` closes the socket.
    """

    size: int
    key: str = field(default_factory=lambda: secrets.token_hex(16))
    registered: dict[int, Registration] = field(default_factory=dict)
    _server: socketserver.ThreadingTCPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _t0: float = field(default_factory=time.monotonic)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the driver service is not running")
        return int(self._server.server_address[1])

    def start(self) -> DriverService:
        service = self

        class _Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                conn: socket.socket = self.request
                conn.settimeout(5.0)
                try:
                    reply = service._register(json.loads(read_line(conn)))
                except (OSError, ConnectionError, ValueError) as exc:
                    reply = {"ok": False, "error": f"bad message: {exc}"}
                with contextlib.suppress(OSError):
                    conn.sendall((json.dumps(reply) + "\n").encode())

        class _Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = _Server((HOST, 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="horovodrun-driver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def _register(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        if not verify(msg, self.key):
            return {"ok": False, "error": "bad signature (not this job's secret key)"}
        try:
            rank, size = int(msg["rank"]), int(msg["size"])
        except (KeyError, TypeError, ValueError):
            return {"ok": False, "error": "message without rank and size"}
        if size != self.size:
            return {"ok": False, "error": f"size {size}, but this job has {self.size} tasks"}
        if not 0 <= rank < self.size:
            return {"ok": False, "error": f"rank {rank} outside 0..{self.size - 1}"}
        with self._lock:
            if rank in self.registered:
                return {"ok": False, "error": f"rank {rank} registered twice"}
            self.registered[rank] = Registration(rank, int(msg.get("pid", -1)),
                                                 str(msg.get("host", "")),
                                                 time.monotonic() - self._t0)
        return {"ok": True}

    def missing(self) -> list[int]:
        """Ranks that have not registered yet."""
        with self._lock:
            return [r for r in range(self.size) if r not in self.registered]


def free_port(host: str = HOST) -> int:
    """A TCP port that is free now (the operating system's choice; it may be taken again later,
    as with ``torchrun --standalone``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def task_env(rank: int, np: int, driver_port: int, master_port: int, key: str, *,
             cycle_time_ms: float | None = None, fusion_threshold_bytes: int | None = None,
             base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of task ``rank`` of ``np`` on one host (Horovod's slot variables plus the
    ``torch.distributed`` rendezvous)."""
    env = dict(os.environ if base is None else base)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(loopback_interfaces(env))  # gloo's pairs on lo too, unless the user names one
    env.update({
        "HOROVOD_HOSTNAME": "localhost",
        "HOROVOD_RANK": str(rank), "HOROVOD_SIZE": str(np),
        "HOROVOD_LOCAL_RANK": str(rank), "HOROVOD_LOCAL_SIZE": str(np),
        "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1",
        "MASTER_ADDR": HOST, "MASTER_PORT": str(master_port),
        DRIVER_ADDR_ENV: HOST, DRIVER_PORT_ENV: str(driver_port), SECRET_KEY_ENV: key,
        "PYTHONUNBUFFERED": "1",  # lines reach the prefixing threads as they are printed
    })
    if cycle_time_ms is not None:
        env["HOROVOD_CYCLE_TIME"] = f"{cycle_time_ms:g}"
    if fusion_threshold_bytes is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(int(fusion_threshold_bytes))
    return env


def _pdeathsig() -> Callable[[], None] | None:
    """A function to run in the child between fork and exec that asks Linux to SIGKILL the task
    when the launcher dies (``PR_SET_PDEATHSIG``); ``None`` elsewhere. libc is loaded here, in
    the parent, so that the child calls only an already-bound C function (no import, no lock)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except OSError:
        return None

    def set_pdeathsig() -> None:
        prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG = 1

    return set_pdeathsig


def _forward(stream: IO[bytes], prefix: str, out: IO[str], lock: threading.Lock,
             tail: Callable[[str | None], None] | None = None) -> None:
    """Copy a task's lines to ``out`` with the rank's prefix, and to ``tail`` (its stderr's:
    :meth:`~backends.horovod.blame.Tails.reader`; ``None`` at end-of-file); keep draining the
    pipe even if ``out`` breaks (``| head``), so that the task never blocks on a full pipe."""
    broken = False
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        if tail is not None:
            tail(line)
        if broken:
            continue
        with lock:
            try:
                out.write(f"{prefix}{line}\n")
                out.flush()
            except (OSError, ValueError):
                broken = True
    stream.close()
    if tail is not None:
        tail(None)


def _terminate(procs: Sequence[subprocess.Popen[bytes]], reaped: set[int],
               grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM every live task's process group, SIGKILL whatever is left after ``grace_s``, and
    reap them all. ``reaped`` holds the pids already dealt with (their group ids must not be
    signalled twice: once empty, a group id may be reused)."""
    procs = [p for p in procs if p.pid not in reaped]
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(deadline - time.monotonic(), 0.0))
    for p in procs:
        # the group too: a task's own children (a shell's python, a DataLoader worker)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        reaped.add(p.pid)


@contextlib.contextmanager
def _stop_on_signals(received: list[int]) -> Iterator[None]:
    """Record SIGINT and SIGTERM in ``received`` while the job runs, instead of dying at once
    (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def horovodrun(np: int, command: Sequence[str], *, cycle_time_ms: float | None = None,
               fusion_threshold_bytes: int | None = None,
               start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
               env: Mapping[str, str] | None = None, stdout: IO[str] | None = None,
               stderr: IO[str] | None = None,
               on_start: Callable[[DriverService, list[int]], None] | None = None) -> int:
    """Run ``command`` as ``np`` Horovod tasks on this machine; return the job's exit status.

    Args:
        np: number of task processes (ranks), at least 1.
        command: the program and its arguments, e.g. ``["python", "train.py", "--epochs", "1"]``.
        cycle_time_ms: the background thread's cycle time, ms (``HOROVOD_CYCLE_TIME``).
        fusion_threshold_bytes: the fusion buffer's size, bytes (``HOROVOD_FUSION_THRESHOLD``).
        start_timeout_s: every task must have called ``hvd.init()`` within this time, s.
        env: extra environment variables for the tasks.
        stdout, stderr: where the prefixed task output and the launcher's messages go
            (default: this process's).
        on_start: called once with the driver and the tasks' pids after they started (tests).

    Returns:
        0 when every task exited with 0; otherwise the status of the task blamed
        (:mod:`backends.horovod.blame`; of the first to fail when the blamed one is blocked;
        128 + n for a signal), 1 when a task did not come up, 130/143 after SIGINT/SIGTERM.

    Raises:
        ValueError: bad arguments (in user terms, one line).
    """
    if np < 1:
        raise ValueError(f"-np must be at least 1, not {np}")
    if not command:
        raise ValueError("no command to run (e.g. horovodrun -np 2 python train.py)")
    if cycle_time_ms is not None and not cycle_time_ms > 0:
        raise ValueError(f"the cycle time must be positive, not {cycle_time_ms:g} ms")
    if fusion_threshold_bytes is not None and fusion_threshold_bytes < 0:
        raise ValueError(f"the fusion threshold must be at least 0, not {fusion_threshold_bytes}")
    if not start_timeout_s > 0:
        raise ValueError(f"the start timeout must be positive, not {start_timeout_s:g} s")
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    base = dict(os.environ)
    base.update(env or {})
    rank_sched_policy(base)  # the tasks' scheduling policy (backends.launch): fail here if bad

    def say(text: str) -> None:
        with lock:
            err.write(f"horovodrun: {text}\n")
            err.flush()

    lock = threading.Lock()
    tails = Tails(np)
    received: list[int] = []
    reaped: set[int] = set()
    pdeathsig = _pdeathsig()
    driver = DriverService(np).start()
    procs: list[subprocess.Popen[bytes]] = []
    readers: list[threading.Thread] = []
    try:
        master_port = free_port()
        with _stop_on_signals(received):
            for rank in range(np):
                try:
                    p = subprocess.Popen(
                        list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, start_new_session=True, preexec_fn=pdeathsig,
                        env=task_env(rank, np, driver.port, master_port, driver.key,
                                     cycle_time_ms=cycle_time_ms,
                                     fusion_threshold_bytes=fusion_threshold_bytes, base=base))
                except OSError as exc:
                    _terminate(procs, reaped)
                    raise ValueError(f"cannot start {command[0]!r}: {exc.strerror}") from None
                procs.append(p)
                for stream, name, sink, tail in ((p.stdout, "stdout", out, None),
                                                 (p.stderr, "stderr", err, tails.reader(rank))):
                    assert stream is not None
                    t = threading.Thread(target=_forward, args=(stream, f"[{rank}]<{name}>:",
                                                                sink, lock, tail), daemon=True)
                    t.start()
                    readers.append(t)
            if on_start is not None:
                on_start(driver, [p.pid for p in procs])
            return _supervise(procs, driver, start_timeout_s, received, reaped, say, tails)
    finally:
        _terminate(procs, reaped)
        for t in readers:
            t.join(timeout=5.0)
        driver.stop()


def _supervise(procs: Sequence[subprocess.Popen[bytes]], driver: DriverService,
               start_timeout_s: float, received: list[int], reaped: set[int],
               say: Callable[[str], None], tails: Tails) -> int:
    """Watch the tasks until all exit, one fails (then blame one: :mod:`.blame`), the start
    check fails or a signal arrives."""
    start = time.monotonic()
    came_up = False
    while True:
        if received:
            say(f"{signal.Signals(received[0]).name} received; terminating all tasks")
            _terminate(procs, reaped)
            return 128 + received[0]
        statuses = [p.poll() for p in procs]
        if any(s not in (None, 0) for s in statuses):
            verdict = judge(procs, tails)
            say(verdict.line([r for r, p in enumerate(procs) if p.poll() is None]))
            _terminate(procs, reaped)
            return verdict.status
        if all(s == 0 for s in statuses):
            missing = driver.missing()
            if missing:
                say(f"warning: {ranks_text(missing)} exited without calling hvd.init()")
            return 0
        if not came_up:
            missing = driver.missing()
            if not missing:
                came_up = True
            elif time.monotonic() - start > start_timeout_s:
                live = [r for r in missing if statuses[r] is None]
                say(f"{ranks_text(missing)} did not come up within the start timeout of "
                    f"{start_timeout_s:g} s (no hvd.init() registered with the driver)"
                    + ("; terminating all tasks" if live else ""))
                _terminate(procs, reaped)
                return 1
        time.sleep(POLL_S)
