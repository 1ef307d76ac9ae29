"""The shaped network: ranks in namespaces on rate-limited links, and nothing left behind.

Runs where root and iproute2 are available (CI here); skips with the reason elsewhere.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backends import shaped
from backends.launch import RankError, spawn
from tests.backends import shaped_fns

pytestmark = pytest.mark.skipif(shaped.missing() is not None,
                                reason=shaped.missing() or "shaped network available")

ROOT = Path(__file__).resolve().parents[2]


def _mine(pid: int) -> list[str]:
    return [n for n in shaped.lab_namespaces() if n.startswith(f"{shaped.PREFIX}{pid}-")]


def _host_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {line.split(":")[1].strip() for line in out.splitlines()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for good; only its parent's wait is missing
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"


def test_ranks_live_in_their_own_namespaces_and_nothing_is_left_behind():
    links = _host_links()
    views = spawn(shaped_fns.where_am_i, 3, network="shaped", bandwidth="1gbit,1gbit,100mbit")
    assert [v["rank"] for v in views] == [0, 1, 2]
    assert all(v["ifaces"] == ["eth0", "lo"] for v in views)  # nothing of the host's
    assert all(v["gloo_ifname"] == "eth0" for v in views)
    assert _mine(os.getpid()) == []
    assert _host_links() == links  # no veth, no bridge on the host
    assert not any(_alive(v["pid"]) for v in views)
    assert mp.active_children() == []


def test_a_transfer_is_rate_limited():
    # 8 MiB at 100 Mbit/s is 0.67 s of line rate; loopback would take milliseconds
    best = spawn(shaped_fns.timed_send, 2, 8 * 2**20, 1, network="shaped",
                 bandwidth="100mbit")
    assert best[1] >= 0.6
    assert best[1] < 5.0


def test_a_failing_rank_is_named_and_nothing_is_left_behind():
    with pytest.raises(RankError) as err:
        spawn(shaped_fns.fail_on_rank, 2, 1, network="shaped", bandwidth="1gbit",
              timeout=10)
    assert err.value.rank == 1
    assert _mine(os.getpid()) == []
    assert mp.active_children() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_launcher_leaves_nothing_behind(tmp_path, sig):
    marker = tmp_path / "rank"
    code = ("import faulthandler, signal, sys; from backends.launch import spawn\n"
            "from tests.backends.shaped_fns import block_forever\n"
            "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
            # a shell's background job starts with SIGINT ignored (and Python keeps it so):
            # this launcher stands for one run in a terminal, where Ctrl-C interrupts
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "if __name__ == '__main__':\n"
            "    try:\n"
            f"        spawn(block_forever, 2, {str(marker)!r}, network='shaped', "
            "bandwidth='1gbit')\n"
            "    except KeyboardInterrupt:\n"
            "        sys.exit(130)\n")
    script = tmp_path / "launcher.py"
    script.write_text(code)
    stderr = (tmp_path / "launcher.err").open("w+")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        end = time.monotonic() + 40
        while not all(Path(f"{marker}.{r}").exists() for r in range(2)):
            assert proc.poll() is None, "the launcher died before its ranks started"
            assert time.monotonic() < end, "the ranks never started"
            time.sleep(0.1)
        pids = [int(Path(f"{marker}.{r}").read_text()) for r in range(2)]
        assert len(_mine(proc.pid)) == 3  # bridge + two ranks, while running
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # say where the launcher is stuck: its stacks
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            stderr.seek(0)
            pytest.fail(f"the launcher did not exit within 20 s of {sig.name}:\n{stderr.read()}")
        assert code == 130
    finally:
        stderr.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _mine(proc.pid) == []
    deadline = time.monotonic() + 5  # children die with their parent (PDEATHSIG) at once
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def test_stale_namespaces_of_a_dead_run_are_removed_and_others_are_kept():
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{shaped.PREFIX}{dead.pid}-r0"
    other = f"other{dead.pid}"  # not the lab's: never touched
    for name in (stale, other):
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert stale in shaped.cleanup_stale()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                               check=True).stdout
        assert stale not in names and other in names
    finally:
        for name in (stale, other):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)


def test_network_setup_failure_removes_what_was_built(monkeypatch):
    net = shaped.ShapedNetwork([10**9, 10**9], tag="x")
    real = shaped._run

    def failing(*cmd: str) -> None:
        if cmd[:2] == ("tc", "-n") and net.rank_ns(1) in cmd:
            raise shaped.ShapedNetworkError("tc failed on purpose")
        real(*cmd)

    monkeypatch.setattr(shaped, "_run", failing)
    with pytest.raises(shaped.ShapedNetworkError):
        net.up()
    assert _mine(os.getpid()) == []
