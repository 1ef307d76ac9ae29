"""Run the test suite as two pytest sessions side by side: ``python -m tests.halves [ARGS]``.

Most of the suite's wall time is spent waiting — for ranks to start, for a deadline to pass,
for a notebook's kernel — and a serial run keeps the two cores about 0.7 busy. Two sessions on
disjoint halves of the tests (:data:`HALVES`, chosen so that each takes about as long) finish
in less time than one session of both. ``ARGS`` go to both sessions (``-q --durations=25``).

The first half reports as it runs; the second's report is kept in a temporary file and printed
when the first is done. Each session has a base temporary folder of its own, removed at the
end. On SIGINT or SIGTERM both sessions' process groups are stopped (ranks and kernels with
them) and nothing is left behind. The exit status is the first half's if it failed, else the
second's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]

HALVES: tuple[tuple[str, ...], tuple[str, ...]] = (
    ("tests/backends", "tests/simulator", "tests/exercises", "tests/benchmarks",
     "tests/textbook", "tests/test_environment.py", "tests/test_halves.py"),
    ("tests/lab", "tests/notebooks", "tests/course"),
)
"""The two halves, as paths under the repository root; together they are every test."""

GRACE_S = 10.0
"""How long a stopped session may take to end before its process group is killed, s."""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End ``proc``'s process group: SIGTERM, then SIGKILL after :data:`GRACE_S`."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def main(args: list[str]) -> int:
    """Run both halves with ``args``; the exit status as described above."""
    missing = [p for half in HALVES for p in half if not (ROOT / p).exists()]
    if missing:
        print(f"tests.halves: no such test path: {', '.join(missing)}", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="distml-halves-"))
    procs: list[subprocess.Popen[bytes]] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        for proc in procs:
            _stop(proc)
        shutil.rmtree(scratch, ignore_errors=True)
        sys.exit(128 + signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        log = (scratch / "second.log").open("wb")
        for i, (half, out) in enumerate(zip(HALVES, (None, log), strict=True)):
            command = [sys.executable, "-m", "pytest", *args,
                       f"--basetemp={scratch / f'tmp{i}'}", *half]
            procs.append(subprocess.Popen(command, cwd=ROOT, stdout=out,
                                          stderr=subprocess.STDOUT if out else None,
                                          start_new_session=True))
        first = procs[0].wait()
        second = procs[1].wait()
        log.close()
        print(f"\n===== second half: {' '.join(HALVES[1])} =====", flush=True)
        sys.stdout.buffer.write((scratch / "second.log").read_bytes())
        sys.stdout.flush()
        return first or second
    finally:
        for proc in procs:
            _stop(proc)
        shutil.rmtree(scratch, ignore_errors=True)
        for sig, handler in old.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
