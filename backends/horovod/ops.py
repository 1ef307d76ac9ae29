"""The collectives in Horovod's shape: asynchronous requests, handles, ``synchronize``.

Book chapter 7, "From the user's view"; re-implemented after reading Horovod's
``horovod/torch/mpi_ops.py`` and ``horovod/common/operations.cc`` (``EnqueueTensorAllreduce``,
``EnqueueTensorBroadcast``); no code is taken from them.

Every call builds a request and a tensor-table entry, hands them to the background thread
(:class:`backends.horovod.background.Engine`) and returns a **handle** (an int) at once; the
blocking forms are ``synchronize(async_form(...))``. Names are prefixed with the operation
(``allreduce.<name>``, ``broadcast.<name>``), and unnamed calls are numbered in call order
(``allreduce.noname.<n>``, counted from ``init``), so every rank must issue unnamed calls in
the same order.
Functions ending in ``_`` work in place.
"""

from __future__ import annotations

import io
import itertools
import pickle
import threading
from typing import Any

import torch

from backends.horovod import basics
from backends.horovod.background import TensorTableEntry
from backends.horovod.messages import ALLREDUCE, BROADCAST, Request


class ReduceOp(str):
    """A reduction of ``allreduce`` (``Average`` or ``Sum``)."""


Average = ReduceOp("Average")
"""Sum over ranks divided by the size (floor division for integer tensors)."""
Sum = ReduceOp("Sum")
"""Sum over ranks."""

_handles: dict[int, TensorTableEntry] = {}
_counter = itertools.count()
_lock = threading.Lock()


def _check_op(op: str) -> str:
    if op not in (Average, Sum):
        raise ValueError(f"op must be hvd.Average or hvd.Sum, got {op!r}")
    return str(op)


def _submit(kind: str, tensor: torch.Tensor, output: torch.Tensor, name: str | None,
            reduce_op: str = "Sum", root_rank: int = -1) -> int:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(tensor).__name__}")
    engine = basics.engine()
    with _lock:
        handle = next(_counter)
    prefix = "allreduce" if kind == ALLREDUCE else "broadcast"
    full = f"{prefix}.{name}" if name is not None else f"{prefix}.noname.{next(engine.noname)}"
    request = Request(full, basics.rank(), kind, str(tensor.dtype).removeprefix("torch."),
                      tuple(tensor.shape), reduce_op, root_rank)
    entry = engine.enqueue(request, TensorTableEntry(full, tensor, output))
    with _lock:
        _handles[handle] = entry
    return handle


def allreduce_async(tensor: torch.Tensor, name: str | None = None, op: str = Average) -> int:
    """Start an all-reduce of ``tensor`` into a new tensor; returns a handle."""
    return _submit(ALLREDUCE, tensor.detach(), torch.empty_like(tensor.detach()), name,
                   _check_op(op))


def allreduce_async_(tensor: torch.Tensor, name: str | None = None, op: str = Average) -> int:
    """Start an in-place all-reduce of ``tensor``; returns a handle."""
    t = tensor.detach()
    return _submit(ALLREDUCE, t, t, name, _check_op(op))


def allreduce(tensor: torch.Tensor, name: str | None = None, op: str = Average) -> torch.Tensor:
    """All-reduce ``tensor`` over every rank; a new tensor (``tensor`` is unchanged)."""
    return synchronize(allreduce_async(tensor, name, op))


def allreduce_(tensor: torch.Tensor, name: str | None = None, op: str = Average) -> torch.Tensor:
    """All-reduce ``tensor`` in place; returns it."""
    synchronize(allreduce_async_(tensor, name, op))
    return tensor


def _check_root(root_rank: int) -> int:
    if not 0 <= int(root_rank) < basics.size():
        raise ValueError(f"root_rank must be within 0..{basics.size() - 1}, got {root_rank}")
    return int(root_rank)


def broadcast_async(tensor: torch.Tensor, root_rank: int, name: str | None = None) -> int:
    """Start a broadcast of root's ``tensor`` into a new tensor; returns a handle."""
    t = tensor.detach()
    return _submit(BROADCAST, t, t.clone(), name, root_rank=_check_root(root_rank))


def broadcast_async_(tensor: torch.Tensor, root_rank: int, name: str | None = None) -> int:
    """Start an in-place broadcast of root's ``tensor``; returns a handle."""
    t = tensor.detach()
    return _submit(BROADCAST, t, t, name, root_rank=_check_root(root_rank))


def broadcast(tensor: torch.Tensor, root_rank: int, name: str | None = None) -> torch.Tensor:
    """Root's ``tensor`` on every rank, as a new tensor."""
    return synchronize(broadcast_async(tensor, root_rank, name))


def broadcast_(tensor: torch.Tensor, root_rank: int, name: str | None = None) -> torch.Tensor:
    """Overwrite ``tensor`` with root's, in place; returns it."""
    synchronize(broadcast_async_(tensor, root_rank, name))
    return tensor


def poll(handle: int) -> bool:
    """Whether the collective behind ``handle`` has finished (never blocks)."""
    with _lock:
        entry = _handles.get(handle)
    if entry is None:
        raise ValueError(f"unknown handle {handle} (already synchronized?)")
    return entry.done.is_set()


def synchronize(handle: int) -> torch.Tensor:
    """Wait for the collective behind ``handle``; its output tensor.

    Raises:
        HorovodInternalError: the collective failed (a mismatch between ranks, a stalled
            tensor, a failed peer, shutdown).
    """
    with _lock:
        entry = _handles.pop(handle, None)
    if entry is None:
        raise ValueError(f"unknown handle {handle} (already synchronized?)")
    engine = basics.engine() if basics.is_initialized() else None
    if engine is None:
        if not entry.done.is_set():
            raise ValueError("Horovod has been shut down while this handle was pending")
        if entry.error is not None:
            raise entry.error
        return entry.output
    result: torch.Tensor = engine.wait(entry)
    return result


def broadcast_object(obj: Any, root_rank: int = 0, name: str | None = None) -> Any:
    """Root's picklable ``obj`` on every rank (its size, then its bytes, broadcast)."""
    if basics.rank() == root_rank:
        data = pickle.dumps(obj)
        length = torch.tensor([len(data)], dtype=torch.int64)
    else:
        data, length = b"", torch.zeros(1, dtype=torch.int64)
    base = name or type(obj).__name__
    broadcast_(length, root_rank, f"{base}.sz")
    payload = (torch.frombuffer(bytearray(data), dtype=torch.uint8) if data
               else torch.zeros(int(length.item()), dtype=torch.uint8))
    broadcast_(payload, root_rank, f"{base}.data")
    return pickle.load(io.BytesIO(payload.numpy().tobytes()))
