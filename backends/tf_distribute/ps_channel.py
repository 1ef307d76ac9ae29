"""The channels between ParameterServerStrategy's tasks: point-to-point, tensors pickled.

Part of the chapter-19 twin (:mod:`backends.tf_distribute.ps_strategy`). TF's tasks talk gRPC,
point to point, and a task that dies only breaks the channels to it: the coordinator goes on
with the other workers. PyTorch's process groups are not like that — a gloo group is broken
for every member once one dies — so the tasks here talk over loopback sockets
(``multiprocessing.connection``: an HMAC-checked handshake, then length-prefixed messages),
with Nagle's algorithm off, carrying messages pickled with each CPU tensor as its NumPy array.

* :func:`connect`, :func:`accept`, :func:`send`, :func:`receive` — one message each way;
* :func:`request` — a request to a ps task and its answer, over one cached connection per
  task, failing with :class:`UnavailableError` (TF: ``tf.errors.UnavailableError``) naming
  the task when it is gone or silent;
* :data:`CONTEXT` — the closure a worker runs: its updates travel with the token
  ``(closure, k)`` that lets a ps apply each once, however often the closure is retried.

Times are seconds.
"""

from __future__ import annotations

import io
import pickle
import socket
import threading
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

import torch

REQUEST_TIMEOUT_S = 20.0
"""How long a request to a ps task may go unanswered before it fails, s."""


class UnavailableError(RuntimeError):
    """A task could not be reached or died (TF: ``tf.errors.UnavailableError``); the message
    names the task."""


def task_name(job: str, index: int) -> str:
    """TF's name of a task: ``/job:ps/replica:0/task:1``."""
    return f"/job:{job}/replica:0/task:{index}"


class _Pickler(pickle.Pickler):
    """Plain :mod:`pickle`, a CPU tensor pickled as its NumPy array: its bytes travel, not a
    shared-memory handle (``multiprocessing``'s reducers for torch) nor a ``torch.save``
    archive (a tensor's own pickling, milliseconds per tensor)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor) and obj.device.type == "cpu":
            return torch.from_numpy, (obj.detach().contiguous().numpy(),)
        return NotImplemented


def dumps(message: Any) -> bytes:
    """``message`` as bytes (:class:`_Pickler`)."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(message)
    return buffer.getvalue()


def no_delay(conn: Connection) -> Connection:
    """Turn off Nagle's algorithm on ``conn``'s socket: a small message written right after
    another (a worker's "started", then its "done") would otherwise wait for the peer's
    delayed acknowledgement, tens of milliseconds."""
    with socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def connect(address: tuple[str, int], authkey: bytes) -> Connection:
    """A connection to the task listening at ``address`` (:func:`no_delay`)."""
    return no_delay(Client(address, authkey=authkey))


def accept(listener: Listener) -> Connection:
    """The next connection to ``listener`` (:func:`no_delay`)."""
    return no_delay(listener.accept())


def send(conn: Connection, message: Any) -> None:
    """Send ``message`` (:func:`dumps`)."""
    conn.send_bytes(dumps(message))


def receive(conn: Connection) -> Any:
    """The next message on ``conn``."""
    return pickle.loads(conn.recv_bytes())


_channels: dict[tuple[str, int], Connection] = {}
"""This process's connections to ps tasks, by address."""
_channels_lock = threading.Lock()


def request(task: str, address: tuple[str, int], authkey: bytes, message: Any,
            timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
    """Send ``message`` to the ps task ``task`` at ``address`` and return its answer, over
    one cached connection per task in this process (requests go one at a time).

    Raises:
        UnavailableError: the task is gone, or silent for ``timeout_s`` seconds.
    """
    with _channels_lock:
        try:
            conn = _channels.get(address) or connect(address, authkey)
            _channels[address] = conn
            send(conn, message)
            if not conn.poll(timeout_s):
                raise UnavailableError(f"{task} did not answer within {timeout_s:g} s")
            status, value = receive(conn)
        except (OSError, EOFError, UnavailableError) as exc:
            stale = _channels.pop(address, None)  # its answer, if any, must not be read later
            if stale is not None:
                stale.close()
            if isinstance(exc, UnavailableError):
                raise
            raise UnavailableError(f"{task} at {address[0]}:{address[1]} is unreachable "
                                   f"({type(exc).__name__}: {exc})") from exc
    if status != "ok":
        raise RuntimeError(f"{task}: {value}")
    return value


def channels_close(addresses: list[tuple[str, int]]) -> None:
    """Close this process's cached connections to ``addresses`` (tasks being stopped)."""
    with _channels_lock:
        for address in addresses:
            stale = _channels.pop(address, None)
            if stale is not None:
                stale.close()


# ---- which closure a message comes from (set by a worker task) -----------------------------

@dataclass
class ClosureContext:
    """Which closure this worker process runs (TF has no such object: its retries rerun a
    function whose variable updates are plain ops). ``updates`` counts the updates it sent, so
    that the ``k``-th update of closure ``c`` carries the token ``(c, k)`` on every attempt —
    the same update each time as long as the closure makes its updates in a fixed order."""

    closure_id: int | None = None
    worker_index: int = -1
    updates: int = 0

    def next_token(self) -> tuple[int, int] | None:
        if self.closure_id is None:
            return None
        self.updates += 1
        return (self.closure_id, self.updates)


CONTEXT = ClosureContext()
