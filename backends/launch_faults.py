"""How a launch fails: every rank's reports, its standard error, and one line naming the culprit.

When one rank fails its peers usually fail moments later — "connection closed by peer", "timed
out" — and the first report to arrive is often a victim's. So the launcher hears every rank out
(:func:`collect`) and blames, in this order:

1. a rank that **died without a word** (``os._exit``, a crash, SIGABRT from gloo's checks, the
   OOM killer), quoting the last line it wrote to standard error (:class:`StderrTap`) — gloo's
   ``[enforce fail at …]`` for a mismatched collective, which otherwise only the rank's own
   stderr would show;
2. a rank with an **error of its own** (anything but a peer's disappearance or a timeout);
3. a rank **blocked in its function** — alive, silent, and not yet at the final barrier — while
   others timed out waiting for it: every rank reports when it *enters* the final barrier
   ("done, waiting for peers"), so a rank waiting there is never the one named;
4. a rank that timed out inside its function (a ``recv`` nobody answered), before one that timed
   out in the final barrier.

The first line of :class:`RankError` names the rank; its traceback or stderr follows below.
"""

from __future__ import annotations

import codecs
import os
import queue
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from backends.lifeline import InheritedFd

LISTEN_AFTER_FAILURE_S = 1.0
"""After the first bad news the launcher listens this long for the cause, s."""

SILENT_DEATH_S = 0.5
"""A rank dead this long without a report counts as failed, s (its last report may be late)."""

TAIL_BYTES = 4096
"""Bytes of each rank's stderr the launcher keeps to quote."""

SECONDARY = ("closed by peer", "Connection reset", "Broken pipe", "Socket Timeout",
             "timed out", "Timed out", "DistBackendError", "DistNetworkError", "NodeFailure")
"""Marks of an error that only reports a peer's failure (its socket closed, a timeout; the
parameter server's ``NodeFailure``: a node died or went silent)."""


class RankError(RuntimeError):
    """A rank failed. ``rank`` is the failing rank, ``remote_traceback`` its traceback text,
    ``stderr_tail`` the last lines it wrote to standard error (when it died without a word)."""

    def __init__(self, rank: int, message: str, remote_traceback: str = "",
                 stderr_tail: str = "") -> None:
        super().__init__(f"rank {rank} {message}"
                         + (f"\n--- traceback of rank {rank} ---\n{remote_traceback}"
                            if remote_traceback else "")
                         + (f"\n--- last lines rank {rank} wrote to stderr ---\n{stderr_tail}"
                            if stderr_tail else ""))
        self.rank = rank
        self.remote_traceback = remote_traceback
        self.stderr_tail = stderr_tail


class StderrTap:
    """Each rank's standard error (fd 2) goes to an unlinked temporary file — no name on disk,
    gone when closed, even after SIGKILL. :meth:`pump` echoes what arrived to the launcher's own
    stderr and keeps each rank's last :data:`TAIL_BYTES` to quote (:meth:`last_lines`)."""

    def __init__(self, world_size: int) -> None:
        self._files = [tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
                       for _ in range(world_size)]
        self._read = [0] * world_size
        self._tail = [b""] * world_size
        self._decoders = [codecs.getincrementaldecoder("utf-8")(errors="replace")
                          for _ in range(world_size)]

    def rank_end(self, rank: int) -> InheritedFd:
        """The file rank ``rank`` writes to, for its arguments (:func:`redirect_stderr`)."""
        return InheritedFd(self._files[rank].fileno())

    def pump(self) -> None:
        """Echo every rank's new output; ``pread`` leaves the offset the rank writes at alone."""
        for rank, fh in enumerate(self._files):
            while chunk := os.pread(fh.fileno(), 1 << 16, self._read[rank]):
                self._read[rank] += len(chunk)
                self._tail[rank] = (self._tail[rank] + chunk)[-TAIL_BYTES:]
                try:
                    sys.stderr.write(self._decoders[rank].decode(chunk))
                    sys.stderr.flush()
                except (OSError, ValueError, AttributeError):  # no stderr, or a closed one
                    pass

    def last_lines(self, rank: int, n: int = 8) -> list[str]:
        """The last ``n`` non-blank lines rank ``rank`` wrote to stderr."""
        text = self._tail[rank].decode(errors="replace")
        return [line.rstrip() for line in text.splitlines() if line.strip()][-n:]

    def close(self) -> None:
        """Echo what is left, then close (and so delete) the files."""
        self.pump()
        for fh in self._files:
            fh.close()


def redirect_stderr(end: InheritedFd) -> None:
    """In a rank: make fd 2 the tap's file (C and C++ code, gloo's included, write there too)."""
    os.dup2(end.fd, 2)
    os.close(end.fd)


@dataclass
class Reports:
    """What the ranks said so far: values, errors (in order of arrival), and who is done."""

    values: dict[int, Any] = field(default_factory=dict)
    errors: dict[int, tuple[str, str]] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)
    """Ranks that finished their function and entered the final barrier."""
    dead_since: dict[int, float] = field(default_factory=dict)

    def reported(self) -> set[int]:
        return set(self.values) | set(self.errors)

    def silent_dead(self) -> list[int]:
        return sorted(r for r in self.dead_since if r not in self.reported())


def collect(procs: list[Any], results: Any, deadline: float | None,
            tap: StderrTap) -> list[Any]:
    """Gather one report per rank (``(rank, "ok"|"done"|"error", value, traceback)``) while
    echoing their stderr; return the values in rank order, or raise :class:`RankError` naming
    the rank to blame (module docstring)."""
    world_size = len(procs)
    seen = Reports()
    end = None if deadline is None else time.monotonic() + deadline
    failing_since: float | None = None
    while len(seen.reported()) < world_size:
        tap.pump()
        now = time.monotonic()
        if failing_since is not None and now - failing_since > LISTEN_AFTER_FAILURE_S:
            break
        try:
            rank, status, value, tb = results.get(timeout=0.05)
        except queue.Empty:
            pass
        else:
            if status == "done":
                seen.done.add(rank)
            elif status == "error":
                seen.errors[rank] = (value, tb)
                failing_since = failing_since or now
            else:
                seen.values[rank] = value
            continue
        for rank, proc in enumerate(procs):
            if rank not in seen.reported() and not proc.is_alive():
                seen.dead_since.setdefault(rank, now)
        if failing_since is None and any(now - seen.dead_since[r] > SILENT_DEATH_S
                                         for r in seen.silent_dead()):
            failing_since = now
        if end is not None and now > end:
            missing = sorted(set(range(world_size)) - seen.reported())
            inside = [r for r in missing if r not in seen.done] or missing
            raise RankError(inside[0], f"did not finish within the {deadline:g} s deadline "
                            f"(ranks still running: {missing}; in their function: {inside})")
    tap.pump()
    if seen.errors or seen.silent_dead():
        raise blame(procs, seen, tap)
    return [seen.values[r] for r in range(world_size)]


def blame(procs: list[Any], seen: Reports, tap: StderrTap) -> RankError:
    """The :class:`RankError` for the rank that caused a failure (module docstring)."""
    silent = seen.silent_dead()
    if silent:
        rank = silent[0]
        lines = tap.last_lines(rank)
        last = f"; its last words on stderr: {lines[-1].strip()}" if lines else ""
        return RankError(rank, f"{ended(procs[rank].exitcode)} without returning a result{last}",
                         stderr_tail="\n".join(lines))
    own = [r for r, (msg, _) in seen.errors.items() if not _secondary(msg)]
    if own:
        return _failed(own[0], seen)
    waiters = sorted(seen.errors)
    blocked = [r for r, proc in enumerate(procs)
               if r not in seen.reported() and r not in seen.done and proc.is_alive()]
    if blocked:
        first = seen.errors[waiters[0]][0]
        return RankError(blocked[0], f"is blocked: it never finished its function, and "
                         f"{_ranks(waiters)} gave up waiting ({_ranks(waiters[:1])}: {first})")
    inside = [r for r in seen.errors if r not in seen.done]
    return _failed((inside or list(seen.errors))[0], seen)


def _failed(rank: int, seen: Reports) -> RankError:
    message, tb = seen.errors[rank]
    where = " in the final barrier" if rank in seen.done else ""
    return RankError(rank, f"failed{where}: {message}", tb)


def _secondary(message: str) -> bool:
    return any(mark in message for mark in SECONDARY)


def ended(exitcode: int | None, word: str = "code") -> str:
    """How a process ended, from its exit code (negative: the signal that killed it)."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with {word} {exitcode}"


def _ranks(ranks: list[int]) -> str:
    """``rank 1`` or ``ranks 1, 2``."""
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)
