"""The launcher: per-rank results, failures that name the rank quickly, no orphans."""

import os
import subprocess
import sys
import time

import pytest

from backends.launch import RANK_SCHED_ENV, RankError, spawn
from tests.backends import rank_fns

HELPERS = ("resource_tracker", "forkserver")
"""multiprocessing's helpers, which live as long as the parent by design: the resource
tracker, and the fork server the ranks are forked from (:func:`backends.launch.rank_context`)."""


def children_of(pid: int) -> list[int]:
    """Live processes descended from ``pid`` (from /proc) other than multiprocessing's
    helpers (its direct children running one) — the ranks the fork server forked included:
    they are its children, not the launcher's, and share its command line."""
    parent: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline") as fh:
                    cmdline = fh.read()
            except OSError:
                continue
            if fields[0] != "Z":
                parent[int(entry)], cmdlines[int(entry)] = int(fields[1]), cmdline
    kids, frontier = [], [pid]
    while frontier:
        below = [p for p, pp in parent.items() if pp in frontier]
        kids += [p for p in below if parent[p] != pid
                 or not any(helper in cmdlines[p] for helper in HELPERS)]
        frontier = below
    return kids


@pytest.fixture(autouse=True)
def no_orphans():
    yield
    deadline = time.monotonic() + 5
    while children_of(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children_of(os.getpid()) == [], "a rank process outlived its launch"


@pytest.mark.parametrize("world", [1, 3])
def test_spawn_returns_each_ranks_value_in_rank_order(world):
    results = spawn(rank_fns.whoami, world, 10, timeout=20)
    assert [r[0] for r in results] == [10 * r for r in range(world)]
    assert {r[1] for r in results} == {world}
    assert len({r[2] for r in results}) == world  # really separate processes


def test_a_raising_rank_is_named_with_its_traceback_within_seconds():
    start = time.monotonic()
    with pytest.raises(RankError) as info:
        spawn(rank_fns.raise_on_rank_1, 3, timeout=20)
    assert time.monotonic() - start < 15
    assert info.value.rank == 1
    assert "ValueError: rank one is unhappy" in str(info.value)
    assert "raise_on_rank_1" in info.value.remote_traceback


def test_a_rank_that_exits_early_is_named_with_its_exit_code():
    start = time.monotonic()
    with pytest.raises(RankError, match="rank 2 exited with code 3") as info:
        spawn(rank_fns.exit_early_on_last_rank, 3, timeout=20)
    assert info.value.rank == 2
    assert time.monotonic() - start < 15


def test_a_hung_rank_is_stopped_by_the_deadline():
    start = time.monotonic()
    with pytest.raises(RankError, match="rank 0 did not finish within the 6 s deadline"):
        spawn(rank_fns.sleep_forever_on_rank_0, 2, timeout=20, deadline=6)
    assert time.monotonic() - start < 15


def test_world_size_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        spawn(rank_fns.whoami, 0, 1)


def test_the_same_rank_function_runs_under_torchrun():
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "backends.launch", "backends.collectives.point_to_point:ping_pong_demo", "65536"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = sorted(line for line in out.stdout.splitlines() if line.startswith("rank "))
    assert [line.split(":")[0] for line in lines] == ["rank 0", "rank 1"]
    assert all(float(line.split(":")[1]) > 0 for line in lines)


def test_ranks_run_under_sched_batch_by_default_and_normal_on_request(monkeypatch):
    monkeypatch.delenv(RANK_SCHED_ENV, raising=False)
    assert spawn(rank_fns.sched_policies, 2) == [("batch", ["batch"])] * 2
    asked = spawn(rank_fns.sched_policies, 2, env={RANK_SCHED_ENV: "normal"})
    assert asked == [("normal", ["normal"])] * 2


def test_ranks_see_the_launchers_environment_and_their_own_settings(monkeypatch):
    # the ranks are forked from a server started once; they must still see the environment
    # as it is at *this* launch, with the launch's own settings on top
    monkeypatch.setenv("DISTML_TEST_MARK", "first")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    seen = spawn(rank_fns.environment_seen, 2, ["DISTML_TEST_MARK", "DISTML_TEST_EXTRA"])
    assert seen == [(["first", None], 1)] * 2
    monkeypatch.setenv("DISTML_TEST_MARK", "second")
    seen = spawn(rank_fns.environment_seen, 2, ["DISTML_TEST_MARK", "DISTML_TEST_EXTRA",
                                                "OMP_NUM_THREADS"],
                 env={"DISTML_TEST_EXTRA": "extra", "OMP_NUM_THREADS": "2"})
    assert seen == [(["second", "extra", "2"], 2)] * 2
    monkeypatch.delenv("DISTML_TEST_MARK")
    seen = spawn(rank_fns.environment_seen, 3, ["DISTML_TEST_MARK", "DISTML_TEST_EXTRA"])
    assert seen == [([None, None], 1)] * 3


def test_an_unknown_scheduling_policy_is_refused_before_any_rank_starts(monkeypatch):
    monkeypatch.setenv(RANK_SCHED_ENV, "fifo")
    with pytest.raises(ValueError, match=f"^{RANK_SCHED_ENV}='fifo' is not a scheduling policy; "
                                         "choose batch or normal$"):
        spawn(rank_fns.whoami, 2, 1)
    assert children_of(os.getpid()) == []


def test_a_sandbox_that_forbids_the_policy_leaves_the_rank_as_it_was(monkeypatch):
    import backends.launch as launch

    def forbidden(*args):
        raise PermissionError("sched_setscheduler: operation not permitted")

    monkeypatch.delenv(RANK_SCHED_ENV, raising=False)
    monkeypatch.setattr(launch.os, "sched_setscheduler", forbidden)
    assert launch.apply_rank_sched() == launch.current_rank_sched() == "normal"
