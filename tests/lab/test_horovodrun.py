"""``horovodrun`` (backends/horovod/runner.py, ``distml-lab horovodrun``): tasks come up with
their Horovod environment and prefixed output; a failing task, a task that never initialises, and
Ctrl-C/SIGTERM end the whole job with a message naming the rank, and nothing is left running."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backends.horovod.runner import DriverService, horovodrun
from backends.horovod.task_service import DriverUnreachable, notify_driver
from lab.cli import main

TASK = str(Path(__file__).with_name("horovodrun_task.py"))
PYTHON = sys.executable


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _with_key(key: str) -> list[int]:
    """Pids of live processes whose environment carries this job's secret key."""
    found = []
    needle = f"HOROVOD_SECRET_KEY={key}".encode()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "environ").read_bytes() and _alive(int(d.name)):
                    found.append(int(d.name))
            except OSError:
                continue
    return found


def _listening(port: int) -> bool:
    """Some socket on this machine listens on ``port`` (IPv4 or IPv6)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                return True
    return False


def _assert_nothing_left(job: dict[str, object], output: str) -> None:
    pids = list(job["pids"])  # type: ignore[call-overload]
    pids += [int(c) for c in re.findall(r"child (\d+)", output)]  # the tasks' own children
    deadline = time.monotonic() + 2.0  # init reaps re-parented grandchildren asynchronously
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "processes survived horovodrun"
    assert _with_key(str(job["key"])) == []
    assert not _listening(int(job["port"]))  # type: ignore[call-overload]
    assert not _listening(int(job["master_port"]))  # type: ignore[call-overload]


def _run(np: int, mode: str, **kw: object) -> tuple[int, str, str, dict[str, object], float]:
    out, err = io.StringIO(), io.StringIO()
    job: dict[str, object] = {}

    def started(driver: DriverService, pids: list[int]) -> None:
        environ = Path(f"/proc/{pids[0]}/environ").read_bytes().split(b"\0")
        master = next(int(v.split(b"=")[1]) for v in environ if v.startswith(b"MASTER_PORT="))
        job.update(pids=pids, key=driver.key, port=driver.port, master_port=master)

    t0 = time.monotonic()
    rc = horovodrun(np, [PYTHON, TASK, mode], stdout=out, stderr=err, on_start=started,
                    **kw)  # type: ignore[arg-type]
    return rc, out.getvalue(), err.getvalue(), job, time.monotonic() - t0


@pytest.mark.parametrize("np", [2, 3])
def test_tasks_allreduce_with_their_environment_and_prefixed_output(np: int) -> None:
    rc, out, err, job, _ = _run(np, "allreduce", cycle_time_ms=2.5,
                                fusion_threshold_bytes=3 * 2**20, start_timeout_s=60)
    assert rc == 0, err
    total = float(np * (np + 1) // 2)
    for r in range(np):
        assert (f"[{r}]<stdout>:rank {r} of {np} local {r} sum {[total] * 3} cycle 2.5 "
                f"env fusion {3 * 2**20}") in out.splitlines()
        assert f"[{r}]<stderr>:rank {r} to stderr" in err.splitlines()
    _assert_nothing_left(job, out)


def test_failing_task_ends_the_job_naming_its_rank() -> None:
    rc, out, err, job, elapsed = _run(3, "fail", start_timeout_s=30)
    assert rc == 3
    assert "horovodrun: task 1 (rank 1) exited with status 3; terminating ranks 0, 2" in err
    assert len(re.findall(r"^\[\d\]<stdout>:up rank", out, re.M)) == 3
    assert elapsed < 15
    _assert_nothing_left(job, out)


def test_task_that_never_initialises_did_not_come_up() -> None:
    rc, _out, err, job, elapsed = _run(2, "noinit", start_timeout_s=3)
    assert rc == 1
    assert "horovodrun: rank 1 did not come up within the start timeout of 3 s" in err
    assert 3 <= elapsed < 10
    _assert_nothing_left(job, "")


def test_the_example_training_script_learns_and_keeps_replicas_equal() -> None:
    out, err = io.StringIO(), io.StringIO()
    rc = horovodrun(2, [PYTHON, "-m", "lab.horovod_train", "--steps", "30"], stdout=out,
                    stderr=err, start_timeout_s=60)
    assert rc == 0, err.getvalue()
    first = re.search(r"^\[0\]<stdout>:step    0  loss (\S+)", out.getvalue(), re.M)
    final = re.search(r"^\[0\]<stdout>:final loss averaged over 2 ranks: (\S+)",
                      out.getvalue(), re.M)
    assert first and final, out.getvalue()
    assert float(final.group(1)) < float(first.group(1))
    assert "<stdout>" not in out.getvalue().replace("[0]<stdout>", "")  # only rank 0 logs


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_to_the_launcher_stops_every_task(sig: signal.Signals, status: int) -> None:
    proc = subprocess.Popen([PYTHON, "-m", "lab.cli", "horovodrun", "-np", "2", PYTHON, TASK,
                             "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        assert all(re.match(r"\[\d\]<stdout>:up rank \d pid \d+ child \d+", x) for x in lines)
        proc.send_signal(sig)
        rc = proc.wait(timeout=15)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
        proc.wait()
    assert rc == status
    assert f"horovodrun: {sig.name} received; terminating all tasks" in err
    pids = [int(p) for line in lines for p in re.findall(r"(?:pid|child) (\d+)", line)]
    deadline = time.monotonic() + 2.0
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)]


def test_tasks_die_with_a_killed_launcher() -> None:
    """SIGKILL leaves the launcher no chance to clean up: the tasks die with it
    (PR_SET_PDEATHSIG). Their own children are beyond its reach, as with Horovod's."""
    proc = subprocess.Popen([PYTHON, "-m", "lab.cli", "horovodrun", "-np", "2", PYTHON, TASK,
                             "sleep"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        proc.kill()
        proc.wait(timeout=10)
        tasks = [int(p) for line in lines for p in re.findall(r"pid (\d+)", line)]
        assert len(tasks) == 2
        deadline = time.monotonic() + 3.0
        while any(_alive(p) for p in tasks) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in tasks if _alive(p)]
    finally:
        for pid in (int(c) for line in lines for c in re.findall(r"child (\d+)", line)):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)  # the tasks' own children, which we started


@pytest.mark.parametrize("argv", [
    ["-np", "0", "python", "x.py"],
    ["-np", "2"],
    ["-np", "2", "--cycle-time-ms", "-1", "python", "x.py"],
    ["-np", "two", "python", "x.py"],
    ["-np", "2", "--fusion-threshold-mb", "-4", "python", "x.py"],
    ["-np", "2", "--start-timeout", "0", "python", "x.py"],
    ["-np", "1", "no-such-program-anywhere"],
])
def test_bad_input_is_one_line_and_status_2(argv: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["horovodrun", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("distml-lab: error: ") and err.count("\n") == 1


def test_cli_runs_the_command_after_a_double_dash(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["horovodrun", "-np", "2", "--", PYTHON, "-c",
                 "import os; print('rank', os.environ['HOROVOD_RANK'])"]) == 0
    out = capsys.readouterr()
    assert sorted(out.out.splitlines()) == ["[0]<stdout>:rank 0", "[1]<stdout>:rank 1"]
    assert "ranks 0, 1 exited without calling hvd.init()" in out.err


def test_driver_checks_who_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = DriverService(2).start()
    try:
        monkeypatch.setenv("HOROVOD_DRIVER_ADDR", "127.0.0.1")
        monkeypatch.setenv("HOROVOD_DRIVER_PORT", str(driver.port))
        monkeypatch.setenv("HOROVOD_SECRET_KEY", driver.key)
        notify_driver(1, 2)
        assert driver.missing() == [0]
        with pytest.raises(DriverUnreachable, match="rank 1 registered twice"):
            notify_driver(1, 2)
        with pytest.raises(DriverUnreachable, match="size 3, but this job has 2 tasks"):
            notify_driver(0, 3)
        monkeypatch.setenv("HOROVOD_SECRET_KEY", "not-the-key")
        with pytest.raises(DriverUnreachable, match="bad signature"):
            notify_driver(0, 2)
        assert driver.missing() == [0]
    finally:
        port = driver.port
        driver.stop()
    assert not _listening(port)
    with pytest.raises(DriverUnreachable, match=f"could not reach horovodrun's driver at "
                       f"127.0.0.1:{port} within 0.3 s"):
        notify_driver(0, 2, timeout_s=0.3)
    monkeypatch.delenv("HOROVOD_DRIVER_ADDR")
    with pytest.raises(ValueError, match="not started by horovodrun"):
        notify_driver(0, 2)
