"""Every server socket the lab opens listens on loopback: the launcher's store, the store demo's,
horovodrun's tasks and driver, RPC's rendezvous and agents, and gloo's pairs.

Each job looks at itself while all its ranks are up: rank 0 lists the TCP sockets in ``LISTEN``
state held by the launching process (this test) and every process below it, found by inode
(``/proc/PID/fd`` → ``socket:[inode]``, matched in ``/proc/PID/net/tcp`` and ``tcp6``), so other
programs on the machine cannot confuse the test. A store or agent on ``0.0.0.0`` or ``::`` (every
interface) would be reachable, without authentication, from the whole network.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from backends.horovod.runner import task_env
from backends.launch import spawn
from backends.rendezvous import INTERFACE_ENV, group_store, listen, master_store
from tests.backends import rank_fns

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]

LOOPBACK = {"127.0.0.1", "::1"}
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


def _descendants(root: int) -> list[int]:
    """``root`` and every live process below it."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _address(hex_addr: str) -> str:
    """``/proc/net/tcp*``'s local address (32-bit words in host byte order) as text."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words)


def listening_sockets(root: int) -> list[dict[str, object]]:
    """Every listening TCP socket of ``root`` and its descendants: pid, command, address, port."""
    found = []
    for pid in _descendants(root):
        try:
            inodes = set()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):  # closed meanwhile (listdir's own, say)
                    inodes.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            tables = [Path(f"/proc/{pid}/net/{t}").read_text() for t in ("tcp", "tcp6")]
        except OSError:  # gone meanwhile
            continue
        for table in tables:
            for row in table.splitlines()[1:]:
                cols = row.split()
                if cols[3] == _LISTEN and f"socket:[{cols[9]}]" in inodes:
                    addr, port = cols[1].rsplit(":", 1)
                    found.append({"pid": pid, "comm": comm, "address": _address(addr),
                                  "port": int(port, 16)})
    return found


def _seen_by_rank_0(root: int) -> list[dict[str, object]] | None:
    """With every rank up (between two barriers), rank 0 lists the job's listeners."""
    dist.barrier()
    seen = listening_sockets(root) if dist.get_rank() == 0 else None
    dist.barrier()
    return seen


def gloo_job(root: int) -> list[dict[str, object]] | None:
    """A spawn rank: one all-reduce (every gloo pair is connected), then look."""
    dist.all_reduce(torch.ones(1))
    return _seen_by_rank_0(root)


def store_demo_job(root: int) -> list[dict[str, object]] | None:
    """A spawn rank running the store demo, which looks as soon as the demo's store is open."""
    import backends.store_demo as demo

    seen = []

    def open_and_look(timeout_s: float) -> Any:
        store = group_store(timeout_s)
        seen.append(_seen_by_rank_0(root))
        return store

    demo.group_store = open_and_look  # type: ignore[assignment]  # this rank process only
    demo.store_demo(timeout_s=10.0, missing_timeout_s=0.1)
    (listeners,) = seen
    return listeners


def rpc_job(root: int) -> list[dict[str, object]] | None:
    """A spawn rank that starts RPC (its rendezvous and TensorPipe agent), then looks."""
    from backends import rpc

    rpc.init_rpc(timeout_s=30)
    try:
        return _seen_by_rank_0(root)
    finally:
        rpc.shutdown()


def horovod_task(root: int) -> None:
    """A task of horovodrun: init, look with every task up, print what rank 0 saw."""
    import backends.horovod as hvd

    hvd.init()
    hvd.allreduce(torch.ones(1), name="up")
    seen = listening_sockets(root) if hvd.rank() == 0 else None
    hvd.allreduce(torch.ones(1), name="seen")
    if seen is not None:
        print("LISTENERS " + json.dumps(seen))
    hvd.shutdown()


def _assert_loopback_only(seen: list[dict[str, object]] | None) -> None:
    assert seen, "the job should have at least its store listening"
    wide = [s for s in seen if s["address"] not in LOOPBACK]
    assert not wide, f"listening beyond loopback: {wide}"


def test_spawn_store_and_gloo_listen_on_loopback_only():
    _assert_loopback_only(spawn(gloo_job, 2, os.getpid(), timeout=30)[0])


def test_store_demo_store_listens_on_loopback_only():
    _assert_loopback_only(spawn(store_demo_job, 2, os.getpid(), timeout=30)[0])


def test_rpc_rendezvous_and_agents_listen_on_loopback_only():
    _assert_loopback_only(spawn(rpc_job, 2, os.getpid(), timeout=30)[0])


def test_horovodrun_tasks_and_driver_listen_on_loopback_only(capsys):
    import io

    from backends.horovod.runner import horovodrun

    out = io.StringIO()
    status = horovodrun(2, [sys.executable, "-m", "tests.backends.test_listeners", "horovod",
                            str(os.getpid())], stdout=out, stderr=out)
    assert status == 0, out.getvalue()
    (line,) = [ln for ln in out.getvalue().splitlines() if "LISTENERS " in ln]
    _assert_loopback_only(json.loads(line.split("LISTENERS ", 1)[1]))


def test_a_store_listens_on_the_address_the_user_names_only():
    store = master_store(2, 5.0, host="127.0.0.2")  # loopback too, but not 127.0.0.1
    client = dist.TCPStore("127.0.0.2", store.port, 2, is_master=False,  # type: ignore[attr-defined]
                           timeout=datetime.timedelta(seconds=5))
    client.set("k", "v")
    assert store.get("k") == b"v"
    mine = [s for s in listening_sockets(os.getpid()) if s["port"] == store.port]
    assert [s["address"] for s in mine] == ["127.0.0.2"]


def test_a_port_in_use_fails_naming_the_address():
    with listen() as taken, pytest.raises(OSError, match=r"cannot listen on 127\.0\.0\.1:\d+"):
        master_store(1, 5.0, port=taken.getsockname()[1])


def test_ranks_get_the_loopback_interface_unless_the_user_names_one(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.setenv("TP_SOCKET_IFNAME", "eth7")  # RPC's: not read by a plain rank
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    (seen, _), = spawn(rank_fns.environment_seen, 1, list(INTERFACE_ENV), timeout=30)
    assert seen == ["lo", "eth7", "lo"]
    env = task_env(0, 2, 1, 2, "key", base={"GLOO_SOCKET_IFNAME": "eth7"})
    assert [env[name] for name in INTERFACE_ENV] == ["eth7", "lo", "lo"]


if __name__ == "__main__" and sys.argv[1:2] == ["horovod"]:
    horovod_task(int(sys.argv[2]))
