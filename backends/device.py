"""Where a real twin's tensors live: one rule, in one place.

The process group's backend chooses the device. Gloo moves CPU tensors, so a gloo rank computes
on the CPU; NCCL moves CUDA tensors only, so an NCCL rank computes on its own GPU,
``cuda:LOCAL_RANK``, which the launcher makes the process's current CUDA device once, before
the group exists (:func:`backends.launch.run_rank`, :func:`backends.torchrun.init_from_env`).
Every real twin asks :func:`device` instead of naming a device, so the same code runs a
chapter's twin on a laptop's CPUs and on a node of GPUs.

* :func:`device` — the device of this rank's tensors (CPU outside a process group);
* :func:`local_devices` — every device one process can drive: the visible GPUs, else the CPU
  (single-process DataParallel, which has no process group, replicates over these);
* :func:`on_device` — a module (its parameters and buffers) moved there; :func:`to_device` —
  the tensors of a forward's arguments moved there;
* :func:`synchronize` — wait for the device's queued work, before a clock is read: CUDA kernels
  run asynchronously, so a host clock read right after a launch measures the launch only;
  :func:`synchronizer` — the same, decided once, for timing loops (asking :func:`device` costs
  a few µs, which a timed region should not hold);
* :func:`peak_memory_bytes` — the most memory this rank's tensors held since
  :func:`reset_peak_memory` (CUDA only).

Tensors built from a seeded CPU :class:`torch.Generator` are drawn on the CPU and then moved
(``.to(device())``), so a GPU run sees the very numbers a CPU run does; on the CPU the move is
a no-op that returns the same tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import nn

M = TypeVar("M", bound=nn.Module)
T = TypeVar("T")


def device() -> torch.device:
    """This rank's device: ``cuda:<current>`` under an NCCL process group, else the CPU
    (gloo, or no process group at all)."""
    if dist.is_available() and dist.is_initialized() and "nccl" in str(dist.get_backend()):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def local_devices() -> list[torch.device]:
    """Every visible CUDA device, ``cuda:0 … cuda:k−1``, or the one CPU when there is none."""
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    return [torch.device("cpu")]


def on_device(module: M) -> M:
    """``module`` with its parameters and buffers on :func:`device` (in place, as
    :meth:`torch.nn.Module.to`)."""
    return module.to(device())


def synchronize() -> None:
    """Block until the work queued on :func:`device` has run (nothing to wait for on the CPU,
    whose operations return when done)."""
    if device().type == "cuda":
        torch.cuda.synchronize()


def _nothing() -> None:
    """Nothing to wait for: CPU operations return when done."""


def synchronizer() -> Callable[[], None]:
    """:func:`synchronize` for this rank's device, chosen now: ``torch.cuda.synchronize`` on a
    GPU, a no-op on the CPU."""
    return torch.cuda.synchronize if device().type == "cuda" else _nothing


def reset_peak_memory() -> None:
    """Start a new :func:`peak_memory_bytes` window (CUDA only; the CPU keeps no such
    counter)."""
    if device().type == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_memory_bytes() -> int | None:
    """The most bytes of CUDA memory this rank's tensors held since :func:`reset_peak_memory`,
    B; ``None`` on the CPU, whose allocator keeps no peak (count tensor bytes instead)."""
    if device().type == "cuda":
        return int(torch.cuda.max_memory_allocated())
    return None


def to_device(obj: T) -> T:
    """``obj`` with every tensor in it (nested in plain lists, tuples and dicts) on
    :func:`device`; a tensor there already is returned as it is (on the CPU: the very same
    tensors)."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device())  # type: ignore[return-value]
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(to_device(x) for x in obj)
    if isinstance(obj, dict):
        return {k: to_device(v) for k, v in obj.items()}  # type: ignore[return-value]
    return obj
