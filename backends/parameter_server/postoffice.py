"""Postoffice: who is who — roles, node ids, registration, barriers, key ranges.

PS-Lite's postoffice (``postoffice.cc``) is the per-process singleton that knows the cluster:
one **scheduler**, ``S`` **servers**, ``W`` **workers**. Nodes register with the scheduler at
start-up (``ADD_NODE``), which answers with the node table; the scheduler runs the barriers of
the node groups; and the postoffice splits the key space into one contiguous **key range per
server** (``GetServerKeyRanges``). Our node id is the ``torch.distributed`` rank:

    rank 0               scheduler
    ranks 1 … S          servers 0 … S−1
    ranks S+1 … S+W      workers 0 … W−1

(PS-Lite numbers nodes differently — scheduler 1, servers 8, 10, …, workers 9, 11, … — and
groups are bit flags as here: :data:`SCHEDULER` 1, :data:`SERVER_GROUP` 2,
:data:`WORKER_GROUP` 4.)

Failure: every wait goes through :meth:`Postoffice.check_alive`, which raises
:class:`NodeFailure` when a peer's process on this host is gone (the node table holds every
node's host and process id; checked every :data:`LIVENESS_PERIOD_S`), when the van saw a
connection close, or when this node has heard nothing for ``timeout_s`` seconds (a hung node,
or one on another host), naming whom it waited for. Registration is the exception: nodes start
at their own pace, and on a loaded host a freshly started process may take many seconds to
build its model before it registers, so the wait for the node table is bounded by
:data:`START_TIMEOUT_S` instead (PS-Lite waits for it without a bound; a peer that dies
meanwhile is reported by the launcher, which watches every process).
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from backends.parameter_server.message import Command, Message, Meta
from backends.parameter_server.van import Van
from simulator.parameter_server import PSConfigError, check_layout, key_ranges

SCHEDULER, SERVER_GROUP, WORKER_GROUP = 1, 2, 4
ALL_GROUPS = SCHEDULER | SERVER_GROUP | WORKER_GROUP
LIVENESS_PERIOD_S = 0.3
"""How often a waiting node checks that its peers' processes still exist, s (PS-Lite sends
heartbeats to the scheduler instead; on one host the process table answers directly)."""
DEATH_SETTLE_S = 1.0
"""How long a node whose connection closed waits for the process table to show the dead peer,
s: a process's sockets close as it exits, a moment before it is gone from the table."""
START_TIMEOUT_S = 90.0
"""How long a node may wait for the node table (every node registered), s."""
ROLE_NAMES = {SCHEDULER: "scheduler", SERVER_GROUP: "server", WORKER_GROUP: "worker"}

__all__ = ["ALL_GROUPS", "SCHEDULER", "SERVER_GROUP", "WORKER_GROUP", "NodeFailure",
           "PSConfigError", "Postoffice"]


class NodeFailure(RuntimeError):
    """A node died or went silent; the message names it."""


class Postoffice:
    """This process's view of the parameter-server cluster.

    Args:
        num_servers, num_workers: ``S`` and ``W``; the process group must have ``1 + S + W``
            ranks.
        num_keys: size of the key space (keys are ``0 … num_keys − 1``).
        splits: where server ranges start (``S`` increasing ints from 0), or ``None`` for
            ranges as equal as possible.
        timeout_s: how long a wait may hear nothing before it fails, s.
    """

    def __init__(self, num_servers: int, num_workers: int, num_keys: int,
                 splits: Sequence[int] | None = None, timeout_s: float = 30.0) -> None:
        self.num_servers, self.num_workers = num_servers, num_workers
        check_layout(num_servers, num_workers, dist.get_world_size())
        self.ranges = key_ranges(num_keys, num_servers, splits)
        self.num_keys = num_keys
        self.timeout_s = timeout_s
        self.my_node = dist.get_rank()
        self.role = (SCHEDULER if self.my_node == 0 else
                     SERVER_GROUP if self.my_node <= num_servers else WORKER_GROUP)
        self.van = Van(self)
        self._cond = threading.Condition()
        self._nodes: dict[int, tuple[int, int, int]] = {}  # id → (role, pid, host hash)
        self._table_ready = False
        self._barrier_done: dict[int, int] = {}  # group → barriers released
        self._arrived: dict[int, set[int]] = {}  # at the scheduler: group → who is waiting
        self._terminated = 0
        self._last_liveness = time.monotonic()
        self.waiting_on: Callable[[], str] = lambda: ""  # an app may say what it awaits

    # -- node ids ---------------------------------------------------------------------------

    @property
    def server_ids(self) -> list[int]:
        return list(range(1, 1 + self.num_servers))

    @property
    def worker_ids(self) -> list[int]:
        return list(range(1 + self.num_servers, 1 + self.num_servers + self.num_workers))

    @property
    def is_scheduler(self) -> bool:
        return self.role == SCHEDULER

    @property
    def is_server(self) -> bool:
        return self.role == SERVER_GROUP

    @property
    def is_worker(self) -> bool:
        return self.role == WORKER_GROUP

    @property
    def my_rank(self) -> int:
        """Index of this node within its role (server 0 …, worker 0 …)."""
        return self.my_node - (1 if self.is_server else 1 + self.num_servers
                               if self.is_worker else 0)

    def members(self, group: int) -> list[int]:
        """Node ids of a group (bit flags may be combined)."""
        return (([0] if group & SCHEDULER else []) + (self.server_ids if group & SERVER_GROUP
                else []) + (self.worker_ids if group & WORKER_GROUP else []))

    def describe(self, node: int) -> str:
        """``"worker 1 (rank 4)"``."""
        if node == 0:
            return "the scheduler (rank 0)"
        if node <= self.num_servers:
            return f"server {node - 1} (rank {node})"
        return f"worker {node - 1 - self.num_servers} (rank {node})"

    # -- start-up and shut-down -------------------------------------------------------------

    def start(self) -> None:
        """Start the van, register with the scheduler, get the node table, meet everyone."""
        me = (self.role, os.getpid(), zlib.crc32(socket.gethostname().encode()))
        if self.is_scheduler:  # in the table before any ADD_NODE can be read: the last one
            with self._cond:   # completes it, and nothing else would
                self._nodes[0] = me
        self.van.start()
        if not self.is_scheduler:
            self.van.send(Message(Meta(recipient=0, command=Command.ADD_NODE),
                                  keys=torch.tensor(me, dtype=torch.int64)))
        self._wait(lambda: self._table_ready, "the node table from the scheduler",
                   max(self.timeout_s, START_TIMEOUT_S))
        self.barrier(ALL_GROUPS)

    def finalize(self) -> None:
        """Meet everyone, then stop every receiving thread (PS-Lite ``Finalize``)."""
        self.barrier(ALL_GROUPS, timeout=not self.is_scheduler)
        if self.is_scheduler:
            self._wait(lambda: self._terminated == self.num_servers + self.num_workers,
                       "every node to stop", self.timeout_s)
        else:  # ask the scheduler to stop us: its TERMINATE ends our receiving thread
            self.van.send(Message(Meta(recipient=0, command=Command.TERMINATE)))
        self.van.join(self.timeout_s)

    # -- barriers ---------------------------------------------------------------------------

    def barrier(self, group: int, timeout: bool = True) -> None:
        """Block until every node of ``group`` has called ``barrier(group)``."""
        with self._cond:
            target = self._barrier_done.get(group, 0) + 1
        if self.is_scheduler:
            self._arrive(group, 0)
        else:
            self.van.send(Message(Meta(recipient=0, command=Command.BARRIER, clock=group)))
        self._wait(lambda: self._barrier_done.get(group, 0) >= target,
                   f"the barrier of {self._group_name(group)}",
                   self.timeout_s if timeout else math.inf)

    def _group_name(self, group: int) -> str:
        if group == ALL_GROUPS:
            return "all nodes"
        return " and ".join(name + "s" for flag, name in ROLE_NAMES.items() if group & flag)

    def _arrive(self, group: int, node: int) -> None:
        """At the scheduler: ``node`` reached the barrier of ``group``."""
        with self._cond:
            arrived = self._arrived.setdefault(group, set())
            arrived.add(node)
            if len(arrived) < len(self.members(group)):
                return
            del self._arrived[group]
        for member in self.members(group):
            if member == 0:
                with self._cond:
                    self._barrier_done[group] = self._barrier_done.get(group, 0) + 1
                    self._cond.notify_all()
            else:
                self.van.send(Message(Meta(recipient=member, command=Command.BARRIER_DONE,
                                           clock=group)))

    # -- the receiving thread's control messages ------------------------------------------

    def on_control(self, msg: Message) -> bool:
        """Handle a control message (called by the van's receiving thread); return whether
        the receiving thread should stop."""
        m = msg.meta
        if m.command == Command.ADD_NODE:
            with self._cond:
                role, pid, host = msg.keys.tolist()
                self._nodes[m.sender] = (role, pid, host)
                complete = len(self._nodes) == 1 + self.num_servers + self.num_workers
                if complete:
                    self._table_ready = True
                    self._cond.notify_all()
                    table = torch.tensor([[n, *v] for n, v in sorted(self._nodes.items())],
                                         dtype=torch.int64).flatten()
            if complete:
                for node in range(1, 1 + self.num_servers + self.num_workers):
                    self.van.send(Message(Meta(recipient=node, command=Command.NODE_TABLE),
                                          keys=table))
        elif m.command == Command.NODE_TABLE:
            rows = msg.keys.view(-1, 4).tolist()
            with self._cond:
                self._nodes = {n: (r, p, h) for n, r, p, h in rows}
                self._table_ready = True
                self._cond.notify_all()
        elif m.command == Command.BARRIER:
            self._arrive(m.clock, m.sender)
        elif m.command == Command.BARRIER_DONE:
            with self._cond:
                self._barrier_done[m.clock] = self._barrier_done.get(m.clock, 0) + 1
                self._cond.notify_all()
        elif m.command == Command.TERMINATE:
            if self.is_scheduler:
                with self._cond:
                    self._terminated += 1
                    self._cond.notify_all()
                self.van.send(Message(Meta(recipient=m.sender, command=Command.TERMINATE)))
                return self._terminated == self.num_servers + self.num_workers
            return True
        return False

    # -- failure ----------------------------------------------------------------------------

    def wake_all(self) -> None:
        """Wake every waiter (the van failed)."""
        with self._cond:
            self._cond.notify_all()

    def dead_nodes(self) -> list[int]:
        """Nodes on this host whose process is gone (or a zombie)."""
        here = zlib.crc32(socket.gethostname().encode())
        with self._cond:
            nodes = dict(self._nodes)
        return [n for n, (_, pid, host) in sorted(nodes.items())
                if n != self.my_node and host == here and not _alive(pid)]

    def check_alive(self, what: Callable[[], str], timeout_s: float | None = None) -> None:
        """Raise :class:`NodeFailure` if a peer died, or if nothing arrived for ``timeout_s``
        seconds (``None``: the postoffice's ``timeout_s``; ``math.inf``: no bound).

        ``what()`` says what this node is waiting for (it goes into the message).
        """
        bound = self.timeout_s if timeout_s is None else timeout_s
        me = self.describe(self.my_node)
        now = time.monotonic()
        dead: list[int] = []
        if self.van.error is not None or now - self._last_liveness > LIVENESS_PERIOD_S:
            self._last_liveness = now
            dead = self.dead_nodes()
        if dead or self.van.error is not None:
            # a dying process closes its sockets before the process table shows it gone: give
            # the table a moment to name the dead peer before blaming a closed connection
            settle = time.monotonic() + DEATH_SETTLE_S
            while not dead:
                dead = self.dead_nodes()
                if dead or time.monotonic() > settle:
                    break
                time.sleep(0.02)
            who = (", ".join(self.describe(n) for n in dead) + " died" if dead
                   else "a peer closed its connection")
            why = f" ({self.van.error.splitlines()[0]})" if self.van.error else ""
            raise NodeFailure(f"{me}: {who} while {what()}{why}")
        silent = time.monotonic() - self.van.last_received
        if silent > bound:
            extra = self.waiting_on()
            raise NodeFailure(f"{me}: nothing received for {silent:.1f} s (timeout "
                              f"{bound:g} s) while {what()}"
                              + (f"; {extra}" if extra else ""))

    def _wait(self, ready: Callable[[], bool], what: str, timeout_s: float) -> None:
        with self._cond:
            while not ready():
                self.check_alive(lambda: f"waiting for {what}", timeout_s)
                self._cond.wait(timeout=0.1)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False
