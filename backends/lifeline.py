"""Ranks that never outlive their launcher: a lifeline, and SIGTERM that unwinds.

A launch must leave nothing behind however it ends — a rank's failure, Ctrl-C, ``kill`` (SIGTERM)
or even ``kill -9`` (SIGKILL) of the launcher, which runs no code at all. Two tools:

* :class:`Lifeline` — a pipe whose write end only the launcher holds. Every rank gets the read
  end and a daemon thread blocked on it (:func:`hold_lifeline`); the kernel closes the write end
  when the launcher dies, however it dies, the read returns end-of-file and the rank exits at
  once (after an optional clean-up, such as deleting the shaped network's namespaces).
  ``PR_SET_PDEATHSIG`` alone cannot do this for ranks forked from ``multiprocessing``'s fork
  server: their parent is the server, not the launcher, and the server waits for end-of-file on
  its own "alive" pipe — whose write end every rank it forked holds. The ranks wait for the
  server and the server for the ranks; only the lifeline breaks that cycle. With the ranks gone,
  the fork server and the resource tracker see end-of-file too and exit.
* :func:`sigterm_unwinds` — while a launch runs, SIGTERM raises :class:`KeyboardInterrupt` in
  the main thread as Ctrl-C does, so the launcher's ``finally`` blocks stop and reap the ranks
  (Python's default for SIGTERM is to die on the spot, skipping every ``finally``).

:class:`InheritedFd` carries a file descriptor to a rank inside ``Process`` arguments.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from multiprocessing import reduction
from types import FrameType
from typing import Any

ORPHANED_EXIT = 70
"""Exit status of a rank that found its launcher gone (nobody is left to read it)."""


class InheritedFd:
    """A file descriptor that travels to a rank in its ``Process`` arguments: pickled while the
    rank starts, it is duplicated into the rank (``multiprocessing.reduction.DupFd``: passed
    along to a fork server's child or to a spawned interpreter), where ``fd`` is its number."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Callable[[Any], InheritedFd], tuple[Any]]:
        return _rebuild_fd, (reduction.DupFd(self.fd),)


def _rebuild_fd(dup: Any) -> InheritedFd:
    return InheritedFd(dup.detach())


class Lifeline:
    """The launcher's side: a pipe made before the ranks start (``rank_end`` goes to each), its
    write end kept until the ranks are reaped (:meth:`close`). Nothing is ever written to it."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()  # both close-on-exec: no exec'd child inherits them

    @property
    def rank_end(self) -> InheritedFd:
        """The read end, for a rank's arguments."""
        return InheritedFd(self._read)

    def close(self) -> None:
        """Close both ends: a rank still alive then exits by itself."""
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._read = self._write = -1


def hold_lifeline(end: InheritedFd, on_loss: Callable[[], None] | None = None) -> None:
    """In a rank: watch the lifeline from a daemon thread; when the launcher is gone run
    ``on_loss`` (errors ignored) and exit with :data:`ORPHANED_EXIT`, whatever the main thread
    is doing (``os._exit``: no ``finally``, no waiting for peers that may be gone too)."""

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(end.fd, 1):
                pass
        if on_loss is not None:
            with contextlib.suppress(BaseException):
                on_loss()
        os._exit(ORPHANED_EXIT)

    threading.Thread(target=watch, name="distml-lifeline", daemon=True).start()


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """While the body runs, SIGTERM raises ``KeyboardInterrupt("SIGTERM")`` in the main thread,
    so ``finally`` blocks clean up; the previous handler is restored afterwards. Off the main
    thread nothing changes (Python runs signal handlers in the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
