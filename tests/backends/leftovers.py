"""What a launch can leave behind, recorded while it runs and looked for after it ended.

A launch may leave five kinds of things: **processes** (ranks, tasks, multiprocessing's fork
server and resource tracker), **listening sockets** (the rendezvous store, gloo's pairs,
horovodrun's driver), **network namespaces** (``dml<pid>-…`` of the shaped network), **links**
(veth pairs in the host's namespace) and **temporary files** (the launcher's ``TMPDIR``).

:meth:`Footprint.take` records, while every rank is up, what the launcher and its descendants
hold; :meth:`Footprint.leftovers` looks again once the launcher has exited and lists, one line
each, whatever of it still exists. Processes are matched by pid *and* start time, sockets by
inode, so a pid or port reused by another program meanwhile is never mistaken for a leftover.
Everything is read from ``/proc`` and ``/var/run/netns`` (plus ``ip -o link``), so it also
works for processes that were re-parented to init when the launcher died.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

NETNS_DIR = Path("/var/run/netns")
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


@dataclass(frozen=True)
class Proc:
    """One process: pid, start time (clock ticks after boot) and what it runs."""

    pid: int
    start: int
    cmdline: str

    def alive(self) -> bool:
        """The same process (pid and start time) still exists and is not a zombie."""
        stat = _stat(self.pid)
        return stat is not None and stat[2] == self.start and stat[1] != "Z"

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.cmdline[:100]})"


@dataclass(frozen=True)
class Listener:
    """A listening TCP socket: its inode, address and port, and the network namespace
    (``/proc/PID/ns/net`` link) it lives in."""

    inode: str
    address: str
    port: int
    netns: str

    def __str__(self) -> str:
        return f"{self.address}:{self.port} (socket {self.inode})"


def _stat(pid: int) -> tuple[int, str, int] | None:
    """``(ppid, state, start time)`` of ``pid``, or ``None`` if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0], int(fields[19])


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    return ""


def descendants(root: int) -> list[Proc]:
    """Every live process below ``root`` (children, grandchildren, …), not ``root`` itself."""
    table: dict[int, tuple[int, str, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None and stat[1] != "Z":
            table[int(entry)] = stat
    found: list[Proc] = []
    frontier = {root}
    while frontier:
        below = {pid for pid, (ppid, _, _) in table.items() if ppid in frontier}
        found += [Proc(pid, table[pid][2], _cmdline(pid)) for pid in sorted(below)]
        frontier = below
    return found


def _address(hex_addr: str) -> str:
    """``/proc/net/tcp*``'s local address (32-bit words in host byte order) as text."""
    import socket

    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words)


def _listen_rows(pid: int | str) -> list[tuple[str, str, int]]:
    """``(inode, address, port)`` of every listening TCP socket in the network namespace of
    process ``pid`` (``"self"``: this one's)."""
    rows = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                cols = row.split()
                if cols[3] == _LISTEN:
                    addr, port = cols[1].rsplit(":", 1)
                    rows.append((cols[9], _address(addr), int(port, 16)))
    return rows


def listeners(pids: list[int]) -> list[Listener]:
    """The listening TCP sockets that processes ``pids`` hold open."""
    found = []
    for pid in pids:
        try:
            inodes = set()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):  # closed meanwhile
                    inodes.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
            netns = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:  # gone meanwhile
            continue
        found += [Listener(inode, addr, port, netns) for inode, addr, port in _listen_rows(pid)
                  if f"socket:[{inode}]" in inodes]
    return sorted(set(found), key=lambda s: (s.port, s.inode))


def lab_namespaces(launcher: int) -> list[str]:
    """Network namespaces of the shaped network that launcher ``launcher`` made."""
    with contextlib.suppress(OSError):
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(f"dml{launcher}-"))
    return []


def host_links() -> set[str]:
    """Names of the network interfaces in this (the host's) namespace."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         timeout=10, check=False).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def caches() -> set[str]:
    """Folders that tools keep in the temporary directory *on purpose*, across runs: torch's
    compile cache (``torch._inductor``'s ``cache_dir()``, made when ``torch._dynamo`` is
    imported, as the launcher's fork server does). Not leftovers of a launch."""
    return {f"torchinductor_{getpass.getuser()}"}


def temp_entries(tmpdir: Path) -> list[str]:
    """What lies in ``tmpdir`` (the launcher's private ``TMPDIR``), folders' contents too, but
    for :func:`caches`."""
    keep = caches()
    return sorted(str(p.relative_to(tmpdir)) for p in tmpdir.rglob("*")
                  if p.relative_to(tmpdir).parts[0] not in keep)


@dataclass
class Footprint:
    """What one launch held while every rank was up, and the host's links before it began."""

    launcher: int
    tmpdir: Path
    links_before: set[str]
    procs: list[Proc] = field(default_factory=list)
    sockets: list[Listener] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    @classmethod
    def take(cls, launcher: int, tmpdir: Path, links_before: set[str]) -> Footprint:
        """Record the launcher's descendants, their and its listening sockets, its namespaces."""
        procs = descendants(launcher)
        return cls(launcher, tmpdir, links_before, procs,
                   listeners([launcher, *(p.pid for p in procs)]), lab_namespaces(launcher))

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def leftovers(self, wait_s: float = 5.0) -> list[str]:
        """Everything recorded that still exists, one line each (``[]``: nothing is left).

        Processes and sockets get ``wait_s`` to go: a rank that finds its launcher dead exits
        within a fraction of a second, and init reaps it soon after."""
        end = time.monotonic() + wait_s
        while (left := self._leftovers()) and time.monotonic() < end:
            time.sleep(0.1)
        return left

    def _leftovers(self) -> list[str]:
        left = [f"process {p}" for p in self.procs if p.alive()]
        host_ns = os.readlink("/proc/self/ns/net")
        listening = {inode for inode, _, _ in _listen_rows("self")}
        # a socket in another namespace goes with the namespace (checked below) or with a
        # process still holding it (checked above)
        left += [f"listening socket {s}" for s in self.sockets
                 if s.netns == host_ns and s.inode in listening]
        left += [f"network namespace {n}" for n in lab_namespaces(self.launcher)]
        links = host_links()
        left += [f"link {name} (new)" for name in sorted(links - self.links_before)]
        left += [f"link {name} (gone)" for name in sorted(self.links_before - links)]
        left += [f"temporary file {name}" for name in temp_entries(self.tmpdir)]
        return left

    def clean_up(self) -> None:
        """Kill whatever recorded process is still alive and delete the launcher's namespaces
        (after a failed test, so that nothing of it disturbs the next)."""
        for proc in self.procs:
            if proc.alive():
                with contextlib.suppress(OSError):
                    os.kill(proc.pid, signal.SIGKILL)
        for name in lab_namespaces(self.launcher):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10,
                           check=False)
