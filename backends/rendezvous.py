"""Rendezvous stores that listen where they are told: loopback unless you name an address.

A ``TCPStore`` is an unauthenticated key-value server: whoever reaches its port can read every
rank's address and write keys that the ranks trust (book ch. 5, "Store and TCPStore"). Its own
server ignores the host it is given and listens on the *wildcard* address (``ss -ltn`` shows
``*:PORT``, IPv4 and IPv6: every interface of the machine), even when every rank is on this
machine and connects to ``127.0.0.1``. So the lab opens the listening socket itself, bound to the
host the ranks use, and hands it to the store (``TCPStore(..., master_listen_fd=fd)``):

* :func:`master_store` — the server end, bound to ``127.0.0.1`` unless the caller names
  another address (``MASTER_ADDR`` of a multi-node ``torchrun`` job, say);
* :func:`group_store` — a fresh store for ranks that already share a process group: rank 0
  serves it, the port travels over the group (the store demo, RPC's rendezvous);
* :func:`loopback_interfaces` — a rank's other listeners, gloo's pairs, RPC's TensorPipe agent
  and NCCL's bootstrap, bind to the interface the environment names (``GLOO_SOCKET_IFNAME``,
  ``TP_SOCKET_IFNAME``, ``NCCL_SOCKET_IFNAME``) or else to the address the machine's host name
  resolves to (gloo, TensorPipe) or its first network interface (NCCL): on a cluster node, a
  public address. A launch on one machine pins them to ``lo``.

A multi-node run opens the ports listed in README.md ("Ports of a multi-node run").
"""

from __future__ import annotations

import datetime
import os
import socket
from collections.abc import Mapping
from typing import Any

LOOPBACK = "127.0.0.1"
BACKLOG = 4096
"""Pending connections the store's socket queues (TCPStore's own figure): every rank of a
large job connects at once."""
INTERFACE_ENV = ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
"""The variables naming the interface gloo's pairs, RPC's TensorPipe agent and NCCL's bootstrap
listen on."""


def listen(host: str = LOOPBACK, port: int = 0) -> socket.socket:
    """A TCP socket listening on ``host:port`` only (port 0: one the operating system picks).

    Raises ``OSError`` naming the address when it cannot be bound (a port in use, an address
    that is not this machine's)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore does
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


def master_store(world_size: int, timeout_s: float, host: str = LOOPBACK, port: int = 0,
                 wait_for_workers: bool = False) -> Any:
    """The server end of a ``TCPStore``, listening on ``host:port`` only.

    Args:
        world_size: number of clients the store expects (ranks).
        timeout_s: the store's timeout for ``get``/``wait``, s.
        host: the address to listen on; loopback unless a multi-node run names its own.
        port: 0 lets the operating system pick one (read it back from ``store.port``).
        wait_for_workers: block until ``world_size`` clients have connected.

    The store takes the socket over (``master_listen_fd``) and closes it when it is deleted.
    """
    import torch.distributed as dist

    sock = listen(host, port)
    bound_port = sock.getsockname()[1]
    return dist.TCPStore(  # type: ignore[attr-defined]
        host, bound_port, world_size, is_master=True, wait_for_workers=wait_for_workers,
        timeout=datetime.timedelta(seconds=timeout_s), master_listen_fd=sock.detach())


def master_addr(environ: Mapping[str, str] | None = None) -> str:
    """The address the rank 0 store listens on: ``MASTER_ADDR`` when the launcher (torchrun,
    horovodrun) names one, else loopback."""
    env = os.environ if environ is None else environ
    return env.get("MASTER_ADDR") or LOOPBACK


def group_store(timeout_s: float, host: str | None = None) -> Any:
    """A fresh ``TCPStore`` for the ranks of the default process group (call on every rank).

    Rank 0 serves it on ``host`` (default :func:`master_addr`) on a port the operating system
    picks, and tells the others the port with a broadcast over the group."""
    import torch.distributed as dist

    host = master_addr() if host is None else host
    world = dist.get_world_size()
    store = master_store(world, timeout_s, host) if dist.get_rank() == 0 else None
    port = [0 if store is None else store.port]
    dist.broadcast_object_list(port, src=0)  # any backend, NCCL included
    if store is None:
        store = dist.TCPStore(  # type: ignore[attr-defined]
            host, port[0], world, is_master=False,
            timeout=datetime.timedelta(seconds=timeout_s))
    return store


def loopback_interfaces(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each of :data:`INTERFACE_ENV` set to the loopback interface, for the ranks of a launch
    on this machine; a variable the environment already sets is left to it (the user named an
    interface), and nothing is set where there is no ``lo`` (not Linux)."""
    env = os.environ if environ is None else environ
    try:
        socket.if_nametoindex("lo")
    except OSError:
        return {}
    return {name: "lo" for name in INTERFACE_ENV if not env.get(name)}
