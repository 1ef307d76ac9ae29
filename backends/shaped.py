"""A cluster on your laptop: every rank in its own network namespace, on a rate-limited link.

On one machine every rank talks over loopback at memory speed while they all fight for the same
cores, so timings say little about a cluster. :func:`spawn_shaped` (reached as
``backends.launch.spawn(..., network="shaped", bandwidth="1gbit")``) gives the ranks a real
network instead, built from Linux parts and torn down afterwards::

          namespace dml<pid>-br                     namespace dml<pid>-r<k>
     ┌───────────────────────────┐             ┌──────────────────────────────┐
     │ br0 10.213.0.254 (store)  │             │ eth0 10.213.0.<k+1>  ← gloo  │
     │   └─ p<k> ── tbf rate R_k ─┼── veth ─────┼─ tbf rate R_k (egress)       │
     │      (egress: what k gets)│             │  (egress: what k sends), lo  │
     └───────────────────────────┘             └──────────────────────────────┘

* one namespace holds the switch — a Linux bridge ``br0`` — and the rendezvous ``TCPStore``
  (the parent opens it there); one namespace per rank holds its end of a veth pair, ``eth0``;
  the addresses (``10.213.0.0/24``) exist only inside these namespaces, never on the host;
* **both directions are shaped.** A token bucket filter on the rank's ``eth0`` egress limits
  what the rank *sends*; one on the bridge port's egress limits what it *receives* — a
  full-duplex switch port of R_k each way, which is what the simulator's
  :func:`simulator.core.shaped.shaped_topology` models. Shaping only the rank side would let
  two senders pour into one receiver at twice its rate;
* **burst** is small: :func:`burst_bytes` is two full frames or 100 µs at the line rate,
  whichever is larger, so after an idle moment a message gets only a few µs "for free" (a burst
  of 1 ms at 1 Gbit/s would hand half of a 256 KiB message through at memory speed);
* **queue**: :data:`QUEUE_BYTES` per qdisc, deep enough that TCP never loses a packet in
  these queues (a tail loss costs a 200 ms retransmission timeout). On the sending side TCP
  Small Queues keeps only about a millisecond of data in the qdisc anyway, so the ACKs that
  share a rank's uplink with its own data do not wait long behind it;
* in each rank's namespace ``tcp_slow_start_after_idle`` is 0, as on tuned cluster hosts: a
  connection that paused between two messages keeps its congestion window instead of starting
  slow again (gloo keeps one connection per pair of ranks for the whole run);
* gloo is bound to ``eth0`` (``GLOO_SOCKET_IFNAME``) and every rank process enters its
  namespace (``setns``) before it opens a socket.

Everything is removed afterwards — on success, when a rank fails, on an exception, on Ctrl-C and
on SIGTERM (``try``/``finally``, a SIGTERM handler, and ``atexit``). Deleting a namespace deletes
the veth ends inside it; nothing is ever created in the host's own namespace. A launcher killed
with SIGKILL runs no code at all: its ranks notice (:mod:`backends.lifeline`) and delete the run's
namespaces as they exit, and the next run removes any a dead launcher left without ranks
(:func:`cleanup_stale`; only names matching ``dml<pid>-``).

Needs Linux, root (``CAP_NET_ADMIN`` and ``CAP_SYS_ADMIN``) and iproute2 (``ip``, ``tc``) with
the ``tbf`` qdisc; :func:`missing` says what is absent, in one line.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulator.core.shaped import parse_bandwidths, spec_text

PREFIX = "dml"
"""Every namespace of the lab is named ``dml<pid>-…``; only those are ever cleaned up."""

SUBNET = "10.213.0"
"""The /24 the ranks live on; it exists only inside the lab's namespaces."""

BRIDGE_ADDR = f"{SUBNET}.254"
"""The bridge's address, where the parent hosts the rendezvous store."""

RANK_IFNAME = "eth0"
"""The rank's end of its veth pair, inside the rank's namespace."""

MAX_WORLD = 253
"""Ranks ``0..252`` take ``10.213.0.1 … .253``."""

FRAME_BYTES = 1514
"""A full Ethernet frame as ``tc`` counts it (MTU 1500 plus the 14-byte header)."""

BURST_S = 100e-6
"""Token-bucket depth in seconds of line rate (at least two frames)."""

QUEUE_BYTES = 16 * 2**20
"""Bytes a shaped queue holds before it drops: more than TCP's send buffer ever has in
flight (4 MiB by default) times the flows a rank receives at once."""

TCP_SETTINGS = {"tcp_slow_start_after_idle": 0}
"""TCP settings of every rank's namespace (see the module docstring)."""

_NS_NAME = re.compile(rf"^{PREFIX}(\d+)-(br|r\d+)$")
_CLONE_NEWNET = 0x40000000
_RUN_DIR = "/var/run/netns"


class ShapedNetworkUnavailable(RuntimeError):
    """This machine cannot build the shaped network; the message says what is missing."""


class ShapedNetworkError(RuntimeError):
    """Building or removing the shaped network failed (an ``ip``/``tc`` command's error)."""


def missing() -> str | None:
    """What is missing for a shaped network, in one line (``None``: nothing is)."""
    if not sys.platform.startswith("linux"):
        return f"the shaped network needs Linux network namespaces (this is {sys.platform})"
    lacks = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if lacks:
        return (f"the shaped network needs iproute2 ({' and '.join(lacks)} not found on PATH; "
                "install the iproute2 package)")
    if os.geteuid() != 0:
        return (f"the shaped network needs root (namespaces, veth and tc need CAP_NET_ADMIN); "
                f"running as uid {os.geteuid()}")
    return None


def check_available() -> None:
    """Raise :class:`ShapedNetworkUnavailable` with one line if :func:`missing` finds a gap."""
    why = missing()
    if why:
        raise ShapedNetworkUnavailable(why)


def burst_bytes(rate_bps: int) -> int:
    """The token bucket's depth for a line rate, bytes: two frames or :data:`BURST_S`."""
    return max(2 * FRAME_BYTES, round(rate_bps / 8 * BURST_S))


# ---- namespaces ---------------------------------------------------------------------------

def _run(*cmd: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise ShapedNetworkError(f"'{' '.join(cmd)}' failed: "
                                 f"{detail[0] if detail else f'exit {done.returncode}'}")


def lab_namespaces() -> list[str]:
    """The names of every namespace the lab owns on this machine (``dml<pid>-…``)."""
    try:
        names = os.listdir(_RUN_DIR)
    except OSError:
        return []
    return sorted(n for n in names if _NS_NAME.match(n))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _delete_namespace(name: str) -> None:
    subprocess.run(("ip", "netns", "delete", name), capture_output=True, check=False)


def cleanup_stale() -> list[str]:
    """Delete the namespaces of lab runs whose process is gone; returns their names."""
    stale = []
    for name in lab_namespaces():
        match = _NS_NAME.match(name)
        assert match is not None
        pid = int(match.group(1))
        if pid != os.getpid() and not _alive(pid):
            _delete_namespace(name)
            stale.append(name)
    return stale


@contextlib.contextmanager
def in_namespace(name: str) -> Iterator[None]:
    """Run the body with this *thread* in network namespace ``name``, then come back."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        enter_namespace(name, libc)
        try:
            yield
        finally:
            if libc.setns(home, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "cannot return to the host's namespace")
    finally:
        os.close(home)


def enter_namespace(name: str, libc: Any = None) -> None:
    """Move the calling thread into network namespace ``name`` for good (``setns``)."""
    libc = libc or ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(f"{_RUN_DIR}/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {name}: {os.strerror(err)}")
    finally:
        os.close(fd)


@dataclass
class ShapedNetwork:
    """The namespaces, bridge, veth pairs and qdiscs of one run; ``with`` builds and removes.

    Attributes:
        rates_bps: line rate of each rank's link, bits/s (rank ``k``'s index).
        tag: distinguishes networks of one process (names are ``dml<pid><tag>-…``).
    """

    rates_bps: list[int]
    tag: str = ""
    namespaces: list[str] = field(default_factory=list)

    @property
    def world_size(self) -> int:
        """Ranks on the network."""
        return len(self.rates_bps)

    @property
    def bridge_ns(self) -> str:
        """The namespace of the bridge and the store."""
        return f"{PREFIX}{os.getpid()}{self.tag}-br"

    def rank_ns(self, rank: int) -> str:
        """The namespace of rank ``rank``."""
        return f"{PREFIX}{os.getpid()}{self.tag}-r{rank}"

    @staticmethod
    def rank_addr(rank: int) -> str:
        """Rank ``rank``'s address on the bridge subnet."""
        return f"{SUBNET}.{rank + 1}"

    def up(self) -> None:
        """Build everything; on any failure remove what was built and re-raise."""
        check_available()
        if not 1 <= self.world_size <= MAX_WORLD:
            raise ValueError(f"a shaped network holds 1 to {MAX_WORLD} ranks, "
                             f"got {self.world_size}")
        cleanup_stale()
        _ACTIVE.add(self)
        try:
            self._add_namespace(self.bridge_ns)
            br = self.bridge_ns
            _run("ip", "-n", br, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", br, "addr", "add", f"{BRIDGE_ADDR}/24", "dev", "br0")
            _run("ip", "-n", br, "link", "set", "br0", "up")
            _run("ip", "-n", br, "link", "set", "lo", "up")  # the store reaches itself
            for rank, rate in enumerate(self.rates_bps):
                ns, port = self.rank_ns(rank), f"p{rank}"
                self._add_namespace(ns)
                # created directly in both namespaces: nothing ever appears on the host
                _run("ip", "link", "add", RANK_IFNAME, "netns", ns, "type", "veth",
                     "peer", "name", port, "netns", br)
                _run("ip", "-n", br, "link", "set", port, "master", "br0")
                _run("ip", "-n", ns, "addr", "add", f"{self.rank_addr(rank)}/24", "dev",
                     RANK_IFNAME)
                for where, dev in ((ns, RANK_IFNAME), (br, port)):
                    _run("tc", "-n", where, "qdisc", "add", "dev", dev, "root", "tbf",
                         "rate", f"{rate}bit", "burst", str(burst_bytes(rate)),
                         "limit", str(QUEUE_BYTES))
                    _run("ip", "-n", where, "link", "set", dev, "up")
                _run("ip", "-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.down()
            raise

    def _add_namespace(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self.namespaces.append(name)

    def down(self) -> None:
        """Delete every namespace of this network (their veth ends and qdiscs go with them)."""
        while self.namespaces:
            _delete_namespace(self.namespaces.pop())
        _ACTIVE.discard(self)

    def describe(self) -> str:
        """One line: ``4 ranks on a switch, 1gbit per port``."""
        return (f"{self.world_size} ranks in namespaces on a bridge, "
                f"{spec_text(self.rates_bps)} per port (tbf, both directions)")

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __enter__(self) -> ShapedNetwork:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


_ACTIVE: set[ShapedNetwork] = set()
"""Networks up in this process, removed at exit whatever happens."""


@atexit.register
def _remove_all() -> None:
    for net in list(_ACTIVE):
        net.down()


# ---- launching ranks inside ---------------------------------------------------------------

def _shaped_rank_main(namespace: str, fn: Callable[..., Any], args: tuple[Any, ...],
                      rank: int, world_size: int, backend: str, host: str, port: int,
                      timeout_s: float, links: Any) -> None:
    """Body of one rank: enter its namespace, tune TCP there, then run as the launcher does.

    A rank that outlives its launcher (``kill -9``) deletes the run's namespaces on its way out
    (:func:`_delete_run`). That is why it has no ``PR_SET_PDEATHSIG``: the signal would kill it
    before it could."""
    from backends.launch import run_rank

    try:
        enter_namespace(namespace)
        for name, value in TCP_SETTINGS.items():  # this namespace's TCP only
            with open(f"/proc/sys/net/ipv4/{name}", "w") as fh:
                fh.write(f"{value}\n")
    except BaseException as exc:
        links.results.put((rank, "error", f"cannot enter namespace {namespace}: {exc}", ""))
        sys.exit(1)
    run_rank(fn, args, rank, world_size, backend, host, port, timeout_s, links,
             on_orphaned=lambda: _delete_run(namespace))


def _delete_run(namespace: str) -> None:
    """Delete every namespace of the run that ``namespace`` belongs to (``dml<pid><tag>-``)."""
    run = namespace.rsplit("-", 1)[0] + "-"
    for name in lab_namespaces():
        if name.startswith(run):
            _delete_namespace(name)


def spawn_shaped(fn: Callable[..., Any], world_size: int, *args: Any,
                 bandwidth: str | Sequence[str | int] = "1gbit", backend: str = "gloo",
                 timeout: float = 30.0, deadline: float | None = None,
                 env: dict[str, str] | None = None) -> list[Any]:
    """:func:`backends.launch.spawn` with every rank in a namespace on a shaped link.

    Args:
        bandwidth: line rate per rank: ``"1gbit"`` for all, ``"1gbit,1gbit,100mbit"`` one per
            rank, or a sequence of such rates (bits/s as ints).
        the rest: as :func:`backends.launch.spawn` (gloo only: the ranks are CPU processes).

    Raises:
        ShapedNetworkUnavailable: no root, no iproute2 (one line saying which).
        ValueError: a bad bandwidth or world size.
        RankError: as :func:`backends.launch.spawn`.
    """
    from backends.launch import RankLinks, resolve_backend, run_ranks
    from backends.lifeline import sigterm_unwinds
    from backends.rendezvous import master_store

    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    rates = parse_bandwidths(bandwidth, world_size)
    backend = resolve_backend(backend)
    if backend != "gloo":
        raise ValueError(f"the shaped network runs gloo ranks on CPUs, not {backend}")
    check_available()
    net = ShapedNetwork(rates)
    store = None
    with sigterm_unwinds():  # Ctrl-C and SIGTERM unwind through the finally below
        try:
            net.up()
            with in_namespace(net.bridge_ns):  # the store listens on the bridge's address only
                store = master_store(world_size, timeout, BRIDGE_ADDR)
            port = store.port
            child_env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
                         "GLOO_SOCKET_IFNAME": RANK_IFNAME, **(env or {})}

            def rank_args(rank: int, links: RankLinks) -> tuple[Any, ...]:
                return (net.rank_ns(rank), fn, args, rank, world_size, backend, BRIDGE_ADDR,
                        port, timeout, links)

            return run_ranks(mp.get_context("spawn"), _shaped_rank_main, rank_args,
                             world_size, deadline, child_env, grace_s=1.0)
        finally:
            del store  # its socket lives in the bridge namespace
            net.down()
