"""The rendezvous: where a Send leaves a tensor under a key and the matching Recv picks it up.

Book chapter 16. TensorFlow never lets two partitions share memory: a tensor crossing devices
is a ``_Send`` node in one partition and a ``_Recv`` node in the other, both naming the same
**rendezvous key**::

    src_device;src_incarnation;dst_device;tensor_name;frame_id:iter_id
    /job:worker/replica:0/task:0/device:CPU:0;0000000000000001;/job:worker/replica:0/task:1/device:CPU:0;relu:0;0:0

(``Rendezvous::CreateKey``; the incarnation is a number that changes whenever the source
device's process restarts, so a stale tensor is never taken for a fresh one; the frame and
iteration tell loop iterations apart). A step has its own rendezvous (``RendezvousMgr::
Find(step_id)``). Two kinds here, one interface:

* :class:`LocalRendezvous` — partitions run by threads of one process (TensorFlow's
  ``LocalRendezvous``, for devices of one task): a table of keys guarded by a condition;
* :class:`ProcessRendezvous` — partitions in different processes (TensorFlow's
  ``RpcRemoteRendezvous``, managed by ``RpcRendezvousMgr``): a Send posts the tensor to its
  peer with gloo (``isend``), a Recv waits for it (``recv``) into a buffer of the shape and
  dtype the graph recorded. TensorFlow's receiver *pulls* the tensor (a ``RecvTensor`` RPC
  with the key); the lab's sender pushes it, matched by a tag the partitioner gave the key.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.distributed as dist


def rendezvous_key(src_device: str, src_incarnation: int, dst_device: str, tensor_name: str,
                   frame_id: int = 0, iter_id: int = 0) -> str:
    """The key a Send and its Recv share (the layout of TensorFlow's
    ``Rendezvous::CreateKey``, the incarnation in 16 hex digits)."""
    return (f"{src_device};{src_incarnation:016x};{dst_device};{tensor_name};"
            f"{frame_id}:{iter_id}")


@dataclass(frozen=True)
class ParsedKey:
    """The five fields of a rendezvous key (``Rendezvous::ParseKey``)."""

    src_device: str
    src_incarnation: int
    dst_device: str
    tensor_name: str
    frame_id: int
    iter_id: int


def parse_key(key: str) -> ParsedKey:
    """A key's fields; :class:`ValueError` for a key that does not have all five."""
    parts = key.split(";")
    if len(parts) != 5 or ":" not in parts[4]:
        raise ValueError(f"a rendezvous key has 5 ';'-separated fields ending frame:iter, "
                         f"got {key!r}")
    frame, _, it = parts[4].partition(":")
    return ParsedKey(parts[0], int(parts[1], 16), parts[2], parts[3], int(frame), int(it))


class Rendezvous(Protocol):
    """What a partition's Send and Recv ops call."""

    def send(self, key: str, tensor: torch.Tensor, dst: int, tag: int) -> None:
        """Leave ``tensor`` under ``key`` for rank ``dst`` (never blocks)."""

    def recv(self, key: str, src: int, tag: int, shape: tuple[int, ...],
             dtype: torch.dtype) -> torch.Tensor:
        """Wait for the tensor under ``key`` from rank ``src``."""

    def finish(self) -> None:
        """Wait until every tensor this side sent has left."""


class LocalRendezvous:
    """Partitions of one process, one thread each: a key's tensor waits in a table."""

    def __init__(self, timeout_s: float = 30.0) -> None:
        self.table: dict[str, torch.Tensor] = {}
        self.cond = threading.Condition()
        self.timeout_s = timeout_s

    def send(self, key: str, tensor: torch.Tensor, dst: int, tag: int) -> None:
        """Put ``tensor`` (a copy: the sender may go on to change its own) under ``key``."""
        with self.cond:
            if key in self.table:
                raise RuntimeError(f"rendezvous key sent twice in one step: {key}")
            self.table[key] = tensor.detach().clone()
            self.cond.notify_all()

    def recv(self, key: str, src: int, tag: int, shape: tuple[int, ...],
             dtype: torch.dtype) -> torch.Tensor:
        """Take the tensor under ``key``, waiting up to the timeout for it."""
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.table, self.timeout_s):
                raise TimeoutError(f"no tensor came for rendezvous key {key}")
            return self.table.pop(key)

    def finish(self) -> None:
        """Nothing is in flight between threads."""


class ProcessRendezvous:
    """Partitions in separate processes of one process group: tensors cross with gloo."""

    def __init__(self) -> None:
        self.pending: list[tuple[dist.Work, torch.Tensor]] = []

    def send(self, key: str, tensor: torch.Tensor, dst: int, tag: int) -> None:
        """Post ``tensor`` to rank ``dst`` under ``tag`` (kept alive until :meth:`finish`)."""
        buf = tensor.detach().contiguous()
        work = dist.isend(buf, dst, tag=tag)
        assert work is not None
        self.pending.append((work, buf))

    def recv(self, key: str, src: int, tag: int, shape: tuple[int, ...],
             dtype: torch.dtype) -> torch.Tensor:
        """Receive the tensor of ``tag`` from rank ``src`` into a fresh buffer."""
        buf = torch.empty(shape, dtype=dtype)
        dist.recv(buf, src, tag=tag)
        return buf

    def finish(self) -> None:
        """Wait for every posted send."""
        for work, _ in self.pending:
            work.wait()
        self.pending.clear()
