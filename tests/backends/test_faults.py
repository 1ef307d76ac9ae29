"""The fault-injection matrix: every fault under every launcher ends in seconds, names the rank to
blame in its first line, and leaves nothing behind.

Faults (:mod:`tests.backends.fault_fns`): a rank raises, calls ``sys.exit(3)`` or ``os._exit(3)``,
receives from a peer that never sends, computes forever, all-reduces a tensor of another size
than its peer's; or the *launcher* gets SIGINT, SIGTERM or SIGKILL. Launchers:
:func:`backends.launch.spawn`, ``distml-lab horovodrun``, the shaped cluster (``spawn(...,
network="shaped")``, needs root and iproute2) and the parameter server's ``train``.

Each case starts the launcher as a process of its own, with a private ``TMPDIR``; once every rank
is up the test records what the job holds (:class:`tests.backends.leftovers.Footprint`), lets the
fault happen (or signals the launcher), and checks that the launcher exits within
:data:`END_S` with the expected status and first line, and that no process, listening socket,
network namespace, link or temporary file of the job remains.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backends import shaped
from tests.backends.fault_fns import BAD, FAULTS, SIGNALS
from tests.backends.leftovers import Footprint, host_links

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
LAUNCHERS = ("spawn", "horovodrun",
             pytest.param("shaped", marks=pytest.mark.skipif(
                 shaped.missing() is not None, reason=f"shaped network: {shaped.missing()}")),
             "ps")
START_S = 90.0
"""Every rank must be up within this long (four processes importing torch on a busy machine)."""
END_S = 30.0
"""A launch must end within this long of its fault. The slowest, a hang, takes a timeout (the
process group's 3 s, the parameter server's 5 s, horovodrun's stall error after 4 s) and a
second of listening for the culprit; the rest is margin for a busy machine."""
SIGNAL_END_S = 15.0
"""The launcher must exit within this long of SIGINT or SIGTERM (it stops the ranks at once)."""
BAD_RANK = {"spawn": 1, "horovodrun": 1, "shaped": 1, "ps": 3}
"""The misbehaving rank (the parameter server's worker 1 is rank 3: scheduler, server, workers)."""


def expected(launcher: str, fault: str) -> tuple[int, str]:
    """The launcher's exit status and a pattern for the first line of its message."""
    bad = BAD_RANK[launcher]
    if fault == "sigint":
        return 130, (r"^horovodrun: SIGINT received; terminating all tasks$"
                     if launcher == "horovodrun" else r"^KeyboardInterrupt\(\)$")
    if fault == "sigterm":
        return 143, (r"^horovodrun: SIGTERM received; terminating all tasks$"
                     if launcher == "horovodrun" else r"^KeyboardInterrupt\('SIGTERM'\)$")
    if fault == "sigkill":
        return -signal.SIGKILL, ""
    if launcher == "horovodrun":
        return _horovodrun_expected(fault)
    who = f"worker {BAD}" if launcher == "ps" else f"rank {bad}"
    lines = {
        "raise": rf"^rank {bad} failed: ValueError: {who} raises on purpose$",
        "exit": rf"^rank {bad} failed: SystemExit: 3$",
        "os_exit": rf"^rank {bad} exited with code 3 without returning a result(;|$)",
        "hang_recv": rf"^rank {bad} failed: RuntimeError: .*(Timed out|Connection closed)",
        "hang_compute": rf"^rank {bad} is blocked: it never finished its function, and ",
        # the rank whose buffer is too small aborts in gloo's check (SIGABRT): its last words
        "mismatch": (r"^rank 0 was killed by SIGABRT without returning a result; its last "
                     r"words on stderr: .*enforce fail at .* 8 vs 4\."),
    }
    if launcher == "ps":  # the server fails handling a push whose values do not fit its keys
        lines["mismatch"] = (r"^rank 1 failed: NodeFailure: server 0 \(rank 1\): .*index_add_\(\):"
                             r" Number of indices \(8\) should be equal to source.size\(dim\)")
    return 1, lines[fault]


def _horovodrun_expected(fault: str) -> tuple[int, str]:
    """horovodrun's verdict (:mod:`backends.horovod.blame`): the task to blame, quoted."""
    task1 = r"^horovodrun: task 1 \(rank 1\) exited with status "
    lines = {
        # rank 0 is cut short by rank 1's shutdown at exit and exits first: not its fault
        "raise": (1, task1 + r"1.*rank 1's last words on stderr: .*ValueError: rank 1 raises"),
        "exit": (3, task1 + r"3"),
        "os_exit": (3, task1 + r"3"),
        "hang_recv": (1, task1 + r"1.*(Connection closed by peer|Timed out)"),
        "hang_compute": (1, r"^horovodrun: rank 1 is blocked: it is still running, and rank 0 "
                            r"gave up waiting.*not by ranks \[1\]"),
        # the coordinator fails both ranks' tensor: either may exit first
        "mismatch": (1, r"^horovodrun: task \d \(rank \d\) exited with status 1.*mismatched "
                        r"shapes: rank \d sent \[[48]\], rank \d sent \[[48]\]"),
    }
    return lines[fault]


def command(launcher: str, fault: str, marks: Path) -> list[str]:
    if launcher == "horovodrun":
        return [PYTHON, "-m", "lab.cli", "horovodrun", "-np", "2", "--start-timeout",
                str(int(START_S)), PYTHON, "-m", "tests.backends.fault_fns", fault, str(marks)]
    return [PYTHON, "-m", "tests.backends.fault_driver", launcher, fault, str(marks)]


def first_line(launcher: str, stderr: str) -> str:
    """The first line of the launcher's message: horovodrun's own first line, or that of the
    exception the driver caught (:mod:`tests.backends.fault_driver`)."""
    heads = ("horovodrun: ",) if launcher == "horovodrun" else ("FAILED: ", "INTERRUPTED: ")
    for line in stderr.splitlines():
        for head in heads:
            if line.startswith(head):
                return line if launcher == "horovodrun" else line[len(head):]
    return ""


def wait_for_ranks(proc: subprocess.Popen[bytes], marks: Path, ranks: list[int],
                   err: Path) -> list[int]:
    """The pids of ``ranks`` once each has arrived (:func:`tests.backends.fault_fns.arrive`)."""
    end = time.monotonic() + START_S
    files = [marks / f"rank{r}.pid" for r in ranks]
    while not all(f.exists() for f in files):
        if proc.poll() is not None:
            pytest.fail(f"the launcher exited ({proc.returncode}) before its ranks were up:\n"
                        + err.read_text()[-3000:])
        if time.monotonic() > end:
            pytest.fail(f"the ranks were not up within {START_S:g} s:\n"
                        + err.read_text()[-3000:])
        time.sleep(0.05)
    return [int(f.read_text()) for f in files]


def run_case(launcher: str, fault: str, tmp_path: Path, group: bool = False) -> None:
    """Start the launcher, wait for its ranks, record, inject, check (module docstring).
    ``group``: a signal goes to the launcher's whole process group, as Jupyter ends a
    kernel."""
    marks, tmpdir, err = tmp_path / "marks", tmp_path / "tmp", tmp_path / "launcher.err"
    marks.mkdir()
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    links = host_links()
    ranks = [2, 3] if launcher == "ps" else [0, 1]
    with err.open("wb") as sink:
        proc = subprocess.Popen(command(launcher, fault, marks), cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=sink, start_new_session=True)
    footprint = Footprint(proc.pid, tmpdir, links)
    try:
        pids = wait_for_ranks(proc, marks, ranks, err)
        footprint = Footprint.take(proc.pid, tmpdir, links)
        assert set(pids) <= set(footprint.pids()), "the ranks should be the launcher's"
        assert footprint.sockets, "the job should listen (its store) while it runs"
        assert len(footprint.namespaces) == (3 if launcher == "shaped" else 0)
        start = time.monotonic()
        if fault in SIGNALS and group:
            os.killpg(proc.pid, getattr(signal, fault.upper()))
        elif fault in SIGNALS:
            proc.send_signal(getattr(signal, fault.upper()))
        else:
            (marks / "go").touch()
        limit = SIGNAL_END_S if fault in ("sigint", "sigterm") else END_S
        try:
            status = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the launcher did not exit within {limit:g} s of the fault:\n"
                        + err.read_text()[-3000:])
        elapsed = time.monotonic() - start
        stderr = err.read_text(errors="replace")
        want_status, pattern = expected(launcher, fault)
        assert status == want_status, stderr[-3000:]
        if pattern:
            assert re.search(pattern, first_line(launcher, stderr)), stderr[-3000:]
        assert footprint.leftovers() == [], stderr[-3000:]
        print(f"{launcher} {fault}: exited {status} {elapsed:.1f} s after the fault; "
              f"{first_line(launcher, stderr)[:200]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        footprint.clean_up()


@pytest.mark.parametrize("fault", FAULTS + SIGNALS)
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_fault_ends_the_launch_names_the_rank_and_leaves_nothing(launcher: str, fault: str,
                                                                   tmp_path: Path) -> None:
    run_case(launcher, fault, tmp_path)


def test_a_launcher_killed_with_its_process_group_leaves_nothing(tmp_path: Path) -> None:
    # what Jupyter does to a notebook's kernel at shutdown: SIGKILL to the kernel's group; the
    # fork server is out of that group, outlives it, and removes its socket's pymp-… folder
    run_case("spawn", "sigkill", tmp_path, group=True)
