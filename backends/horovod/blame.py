"""Which task ``horovodrun`` blames when a job fails: the culprit, not the first to give up.

When one task fails its peers fail moments later: Horovod's background thread loses a connection
("Connection reset by peer"), a collective is cut short by a peer's shutdown at exit ("Horovod
has been shut down"), the stall inspector gives up on a tensor that a rank never submitted
(``HOROVOD_STALL_SHUTDOWN_TIME_SECONDS``). The first task to exit is often such a victim: a rank
that raises still shuts Horovod down on its way out, and the peer it cut short exits first.
Horovod's own launcher names whoever exits first; this one listens a moment longer
(:data:`backends.launch_faults.LISTEN_AFTER_FAILURE_S`) and blames, as
:mod:`backends.launch_faults` does for ``spawn``:

1. a task that failed **of its own**: killed by a signal, or exited non-zero with last words on
   stderr that are not a peer's failure (an exception of its own, or nothing: ``sys.exit(3)``);
2. a task **still running** while those that failed only gave up waiting (it is blocked);
3. the first task that failed.

The message quotes the blamed task's last line on stderr (for a blocked task, that of the first
task that gave up waiting for it: the stall inspector's error names the ranks it waited for).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backends.launch_faults import LISTEN_AFTER_FAILURE_S, SECONDARY, ended

HOROVOD_SECONDARY = (*SECONDARY, "Horovod has been shut down",
                     "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS")
"""Marks of a task's error that only reports a peer's failure: the launcher's, a peer's shutdown,
the stall inspector's error (a tensor some rank never submitted)."""
POLL_S = 0.05
LAST_WORDS_S = 0.5
"""How long the launcher waits for a failed task's last lines on stderr to reach it, s."""


class Tails:
    """The last few lines each task wrote to stderr (filled by the threads that forward them,
    which call :meth:`close` at end-of-file)."""

    def __init__(self, np: int, keep: int = 8) -> None:
        self._lines = [deque[str](maxlen=keep) for _ in range(np)]
        self._closed = [threading.Event() for _ in range(np)]
        self._lock = threading.Lock()

    def add(self, rank: int, line: str) -> None:
        if line.strip():
            with self._lock:
                self._lines[rank].append(line.strip())

    def reader(self, rank: int) -> Callable[[str | None], None]:
        """What the thread forwarding task ``rank``'s stderr calls with each line, and with
        ``None`` at end-of-file."""

        def read(line: str | None) -> None:
            if line is None:
                self._closed[rank].set()
            else:
                self.add(rank, line)

        return read

    def wait_closed(self, ranks: Sequence[int], timeout_s: float) -> None:
        """Wait until the stderr of ``ranks`` reached end-of-file (their last words are in),
        at most ``timeout_s`` in all (a task's own child may hold the pipe open)."""
        end = time.monotonic() + timeout_s
        for rank in ranks:
            self._closed[rank].wait(max(0.0, end - time.monotonic()))

    def last(self, rank: int) -> str:
        """Task ``rank``'s last non-blank line on stderr (``""``: none)."""
        with self._lock:
            return self._lines[rank][-1] if self._lines[rank] else ""


@dataclass(frozen=True)
class Verdict:
    """The task to blame, the job's exit status, what happened, and the last words of the task
    that tells most (``quoted``: the blamed one, or the first to give up on a blocked one)."""

    rank: int
    status: int
    message: str
    quoted: int
    last_words: str

    def line(self, terminating: Sequence[int]) -> str:
        """The message, the tasks being terminated, the last words: one line."""
        return (self.message + (f"; terminating {ranks_text(terminating)}" if terminating else "")
                + (f"; {ranks_text([self.quoted])}'s last words on stderr: {self.last_words}"
                   if self.last_words else ""))


def judge(procs: Sequence[subprocess.Popen[bytes]], tails: Tails) -> Verdict:
    """Once a task has failed: listen for the others' fate for a moment, then blame one."""
    failed: list[int] = []
    end = time.monotonic() + LISTEN_AFTER_FAILURE_S
    while True:
        statuses = [p.poll() for p in procs]
        failed += [r for r, s in enumerate(statuses) if s not in (None, 0) and r not in failed]
        if all(s is not None for s in statuses) or time.monotonic() > end:
            break
        time.sleep(POLL_S)
    tails.wait_closed(failed, LAST_WORDS_S)
    return blame(statuses, failed, tails)


def blame(statuses: Sequence[int | None], failed: list[int], tails: Tails) -> Verdict:
    """The verdict for tasks ``failed`` (in the order they failed; ``statuses``: ``None`` for a
    task still running), by the rules of the module docstring."""
    own = [r for r in failed if _own(statuses[r], tails.last(r))]
    running = [r for r, s in enumerate(statuses) if s is None]
    if not own and running:
        first = failed[0]
        return Verdict(running[0], _exit_status(statuses[first]),
                       f"rank {running[0]} is blocked: it is still running, and "
                       f"{ranks_text(failed)} gave up waiting", first, tails.last(first))
    rank = (own or failed)[0]
    return Verdict(rank, _exit_status(statuses[rank]),
                   f"task {rank} (rank {rank}) {ended(statuses[rank], 'status')}", rank,
                   tails.last(rank))


def _own(status: int | None, last_words: str) -> bool:
    return status is not None and (status < 0 or not any(m in last_words
                                                         for m in HOROVOD_SECONDARY))


def _exit_status(status: int | None) -> int:
    """Shell convention: 128 + n for a task killed by signal n."""
    assert status is not None
    return 128 - status if status < 0 else status


def ranks_text(ranks: Sequence[int]) -> str:
    """``rank 1`` or ``ranks 1, 2``."""
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)
