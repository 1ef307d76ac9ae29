"""ParameterServerStrategy's tasks on ranks a launcher started: torchrun's, over several machines.

Part of the chapter-19 twin. :class:`~backends.tf_distribute.ps_strategy.LocalCluster` starts
its ps and worker tasks as processes of this host, as TF's in-process test cluster does. In a
real cluster TF's tasks are started by the cluster manager, several machines' worth, and each
learns from ``TF_CONFIG`` which task it is. Here torchrun is the cluster manager: it starts
``1 + S + W`` ranks over its nodes, and :func:`deal_roles` is the ``TF_CONFIG`` each gets:

* rank 0 is the **chief** (the coordinator; TF's chief is task 0, and the lab's rank 0 is the
  one that writes the records);
* the ``S`` **ps** tasks, then the ``W`` **workers**, are dealt over the nodes like cards,
  starting with the node after the chief's, so that the shards and the workers are spread
  over the machines and the chief's node is not crowded.

The rank of each task, ``S = 2`` ps tasks (ranks are numbered node by node, as torchrun's)::

    W = 1 on 2 nodes × 2 ranks          W = 3 on 2 nodes × 3 ranks
    node 0: 0 chief  1 ps 1             node 0: 0 chief  1 ps 1      2 worker 1
    node 1: 2 ps 0   3 worker 0         node 1: 3 ps 0   4 worker 0  5 worker 2

:func:`run_on_ranks` runs a function of the cluster (a measurement) on the chief while every
other rank serves its task; the tasks listen on the address their machine reaches the
rendezvous host by (:func:`node_address`), and each holds a control connection to the chief,
which tells it to stop when the function has returned (or which breaks if the chief dies).
The chief cannot watch or kill a task on another machine: a lost task shows on its channel,
as with TF's gRPC (:class:`RankProcess`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Listener
from typing import Any

from backends.tf_distribute.ps_channel import (
    CONTEXT,
    accept,
    channels_close,
    connect,
    receive,
    send,
    task_name,
)
from backends.tf_distribute.ps_strategy import ParameterServer, Task, serve_connection

Role = tuple[str, int]
"""A task: its job (``chief``, ``ps``, ``worker``) and its index in the job."""


def deal_roles(nodes: Sequence[int], num_ps: int) -> list[Role]:
    """Each rank's task, given each rank's node (``nodes[rank]``): rank 0 the chief, then the
    ps tasks and the workers dealt over the nodes in turn, starting after the chief's node;
    within a node, in rank order.

    Raises:
        ValueError: fewer than ``2 + num_ps`` ranks (a chief, the ps tasks and a worker).
    """
    if num_ps < 1 or len(nodes) < 2 + num_ps:
        raise ValueError(f"a chief, {num_ps} ps and a worker need {2 + num_ps} ranks or more, "
                         f"got {len(nodes)}")
    order = sorted(set(nodes))
    start = (order.index(nodes[0]) + 1) % len(order)
    order = order[start:] + order[:start]
    free = {n: [r for r in range(1, len(nodes)) if nodes[r] == n] for n in order}
    dealt: list[int] = []
    while len(dealt) < len(nodes) - 1:
        dealt += [free[n].pop(0) for n in order if free[n]]
    roles: list[Role] = [("chief", 0)] * len(nodes)
    for k, rank in enumerate(dealt):
        roles[rank] = ("ps", k) if k < num_ps else ("worker", k - num_ps)
    return roles


def node_address() -> str:
    """The address this machine reaches the rendezvous host (``MASTER_ADDR``) by: the one its
    tasks listen on (a UDP socket's route, nothing sent)."""
    master = os.environ.get("MASTER_ADDR", "127.0.0.1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((master, int(os.environ.get("MASTER_PORT", "9"))))
            return str(probe.getsockname()[0])
        except OSError:
            return socket.gethostbyname(socket.gethostname())


@dataclass
class RankProcess:
    """A task's process as the chief sees it: a rank of the launcher, maybe on another
    machine — its pid there, never watched nor killed from here (the coordinator learns of
    its loss from the channel)."""

    pid: int
    host: str
    exitcode: int | None = None

    def is_alive(self) -> bool:
        return True

    def kill(self) -> None:
        """Nothing: another machine's process; the coordinator stops sending it work."""

    def join(self, timeout: float | None = None) -> None:
        """Nothing to wait for here."""


@dataclass
class RankCluster:
    """The chief's view of the tasks on the other ranks (a
    :class:`~backends.tf_distribute.ps_strategy.Cluster`); ``controls`` are their control
    connections."""

    authkey: bytes
    workers: list[Task]
    ps: list[Task]
    controls: list[Connection] = field(repr=False)

    def stop(self) -> None:
        """Close the chief's channels to the ps tasks and tell every task to stop."""
        channels_close([t.address for t in self.ps])
        for conn in self.controls:
            with contextlib.suppress(OSError):
                send(conn, ("stop",))
            conn.close()


def _all_gather(value: Any) -> list[Any]:
    import torch.distributed as dist

    values: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def _rank_main(num_workers: int, num_ps: int, body: Callable[..., Any],
               args: tuple[Any, ...]) -> Any:
    """One rank: take its task, listen, learn every task's address; the chief runs
    ``body(cluster, *args)`` and returns ``(value, placement)``, a task serves until told to
    stop and returns ``None``."""
    import torch.distributed as dist

    rank = dist.get_rank()
    if dist.get_world_size() != 1 + num_ps + num_workers:
        raise ValueError(f"{num_workers} workers and {num_ps} ps need {1 + num_ps + num_workers}"
                         f" ranks with the chief, got {dist.get_world_size()}")
    me = {"node": int(os.environ.get("GROUP_RANK", "0")), "host": socket.gethostname(),
          "pid": os.getpid(), "authkey": os.urandom(16) if rank == 0 else b""}
    peers = _all_gather(me)
    roles = deal_roles([p["node"] for p in peers], num_ps)
    authkey = peers[0]["authkey"]
    listener = Listener((node_address(), 0), authkey=authkey)
    addresses = _all_gather(listener.address)
    tasks = {role: Task(role[0], role[1], addresses[r], RankProcess(peers[r]["pid"],
                                                                   peers[r]["host"]))
             for r, role in enumerate(roles)}
    if roles[rank][0] != "chief":
        _serve(listener, roles[rank], addresses[0], authkey,
               [tasks["ps", i].address for i in range(num_ps)])
        return None
    with listener:
        controls = [accept(listener) for _ in range(len(roles) - 1)]
    placement = [{"task": task_name(*role), "rank": r, "node": peers[r]["node"],
                  "host": peers[r]["host"]} for r, role in enumerate(roles)]
    cluster = RankCluster(authkey, [tasks["worker", i] for i in range(num_workers)],
                          [tasks["ps", i] for i in range(num_ps)], controls)
    try:
        return body(cluster, *args), placement
    finally:
        cluster.stop()


def _serve(listener: Listener, role: Role, chief: tuple[str, int], authkey: bytes,
           ps_addresses: list[tuple[str, int]]) -> None:
    """A ps or worker task on this rank: serve every connection on its own thread until the
    chief says stop (or hangs up); then close the listener and this rank's channels."""
    import torch

    from backends.tf_distribute.coordinator import serve_coordinator

    torch.set_num_threads(1)  # as a LocalCluster's task
    job, index = role
    ps = ParameterServer()
    CONTEXT.worker_index = index if job == "worker" else -1

    def serve(conn: Connection) -> None:
        with conn, contextlib.suppress(EOFError, OSError):
            if job == "ps":
                serve_connection(conn, ps)
            else:
                serve_coordinator(conn)

    stopped = threading.Event()
    accepting = threading.Thread(target=_accept_until, args=(listener, stopped, serve),
                                 daemon=True, name=f"distml-{job}{index}")
    accepting.start()
    with connect(chief, authkey) as control, contextlib.suppress(EOFError, OSError):
        receive(control)  # ("stop",), or the chief is gone
    stopped.set()
    with contextlib.suppress(OSError):  # wake the accept so that it sees the stop
        connect(listener.address, authkey).close()
    accepting.join()
    channels_close(ps_addresses)  # a worker's channels: the ps tasks' threads then end


def _accept_until(listener: Listener, stopped: threading.Event,
                  serve: Callable[[Connection], None]) -> None:
    """Accept connections to ``listener``, each served on a thread, until ``stopped``."""
    with listener:
        while True:
            conn = accept(listener)
            if stopped.is_set():
                conn.close()
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()


def run_on_ranks(num_workers: int, num_ps: int, body: Callable[..., Any], *args: Any
                 ) -> tuple[Any, list[dict[str, Any]]]:
    """``body(cluster, *args)`` on the chief of a cluster made of ``1 + num_ps + num_workers``
    ranks (torchrun's when :func:`backends.torchrun.attach` joined them, else processes
    :func:`backends.launch.spawn` starts here); its value and where each task ran (``task``,
    ``rank``, ``node``, ``host``), on every rank. ``body`` is a module-level function."""
    from backends.launch import spawn

    values = spawn(_rank_main, 1 + num_ps + num_workers, num_workers, num_ps, body, args)
    value, placement = values[0]
    return value, placement
