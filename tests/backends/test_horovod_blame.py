"""horovodrun's verdict (backends/horovod/blame.py): the culprit, not the first task to give up."""

from __future__ import annotations

import pytest

from backends.horovod.blame import Tails, blame

SHUT_DOWN = "HorovodInternalError: Horovod has been shut down"
STALL = ("HorovodInternalError: tensor 'x' was submitted by ranks [0] but not by ranks [1] "
         "within 4 s (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS)")


def tails(*last_words: str) -> Tails:
    out = Tails(len(last_words))
    for rank, words in enumerate(last_words):
        out.add(rank, words)
    return out


@pytest.mark.parametrize(("statuses", "failed", "words", "rank", "status", "line"), [
    # rank 1 raised; rank 0, cut short by rank 1's shutdown at exit, exited first
    ([1, 1], [0, 1], (SHUT_DOWN, "ValueError: bad input"), 1, 1,
     "task 1 (rank 1) exited with status 1; rank 1's last words on stderr: ValueError: bad input"),
    # sys.exit(3) says nothing: silence is not a peer's failure
    ([1, 3], [0, 1], (SHUT_DOWN, ""), 1, 3, "task 1 (rank 1) exited with status 3"),
    # killed by a signal: its own failure, whatever it said before
    ([1, -9], [0, 1], (SHUT_DOWN, "Connection reset by peer"), 1, 137,
     "task 1 (rank 1) was killed by SIGKILL; rank 1's last words on stderr: Connection reset by "
     "peer"),
    # rank 1 computes forever; rank 0's stall error names it
    ([1, None], [0], (STALL, ""), 1, 1,
     f"rank 1 is blocked: it is still running, and rank 0 gave up waiting; terminating rank 1; "
     f"rank 0's last words on stderr: {STALL}"),
    # only peers' failures and nobody running: the first to fail
    ([1, 1], [1, 0], ("Connection closed by peer", "Timed out"), 1, 1,
     "task 1 (rank 1) exited with status 1; rank 1's last words on stderr: Timed out"),
])
def test_the_task_to_blame(statuses: list[int | None], failed: list[int],
                           words: tuple[str, ...], rank: int, status: int, line: str) -> None:
    verdict = blame(statuses, failed, tails(*words))
    assert (verdict.rank, verdict.status) == (rank, status)
    running = [r for r, s in enumerate(statuses) if s is None]
    assert verdict.line(running) == line


def test_a_tail_keeps_the_last_non_blank_line_until_end_of_file() -> None:
    kept = Tails(1)
    read = kept.reader(0)
    for line in ("Traceback (most recent call last):", "ValueError: bad input", "  "):
        read(line)
    read(None)
    kept.wait_closed([0], timeout_s=0.0)
    assert kept.last(0) == "ValueError: bad input"
