"""DataParallel from scratch: one process, one replica of the model per device (book ch. 4).

``torch.nn.DataParallel`` (DP) trains on several devices from a single Python process. Every
iteration its forward pass takes four steps, each a function here with PyTorch's name:

1. :func:`scatter` — cut the batch along ``dim`` into chunks with ``torch.chunk``'s rule
   (``⌈n/k⌉`` rows each, the last one shorter; a batch of 5 on 4 devices makes only 3 chunks,
   and only 3 replicas run) and copy chunk ``i`` to device ``i``;
2. :func:`replicate` — copy the module's parameters and buffers from the first device to every
   other device *in this iteration* (:class:`Broadcast`, differentiable: its backward adds the
   replicas' gradients onto the originals) and build a shallow module copy around them;
3. :func:`parallel_apply` — run replica ``i`` on chunk ``i``, one Python thread per replica;
4. :func:`gather` — copy every output to the first device and concatenate them.

The loss is computed on the first device. ``loss.backward()`` then runs the graph backwards:
gather's backward scatters the output gradient, each replica runs its backward, and
:class:`Broadcast`'s backward — ``reduce_add`` — sums every replica's gradient onto the first
device's parameters, where the optimizer steps. The next iteration replicates again.

On a machine with several GPUs ``devices`` are CUDA devices and the copies cross PCIe or NVLink.
On CPU the "devices" are replicas in threads: ``DataParallel(model, ["cpu"] * 4)``. So that
the CPU twin has the same steps and costs as the GPU one, a replica other than the first
gets its own *copy* of whatever crosses a device boundary (chunks, parameters, outputs,
gradients) — the memcpy standing in for the device-to-device copy.

What PyTorch does differently: on GPUs ``replicate`` and ``reduce_add`` use NCCL's broadcast
and reduce when available, copies are asynchronous on per-device streams, and the autograd
engine runs each GPU's backward on its own thread. On CPU the autograd engine runs *all* of
the backward on the calling thread, so here the replicas' backwards run one after another —
the simulated twin (:mod:`simulator.data_parallel`) models both. ``torch.nn.DataParallel``
itself needs CUDA: on a CPU-only build it finds no device and just calls the module.

Try it::

    python -c "import torch; from backends.data_parallel import DataParallel; \\
        m = torch.nn.Linear(8, 2); print(DataParallel(m, ['cpu'] * 3)(torch.randn(5, 8)).shape)"
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from torch import Tensor, nn

from backends.device import local_devices
from simulator.core.engine import Trace

DeviceLike = torch.device | str | int


# ---- tracing: spans on the simulator's schema, one row per device ----------------------------
# A copy is drawn on the row of the device it serves (the one that is not the first), as the
# simulated twin draws it, although the host thread does every copy.

@contextmanager
def _span(trace: Trace | None, device_index: int, kind: str, name: str,
          nbytes: int = 0) -> Iterator[None]:
    """Record the ``with`` block as a span of device ``device_index`` (no-op without a trace)."""
    if trace is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        trace.record(device_index, kind, name, start, time.perf_counter(), nbytes)


def _nbytes(tensors: Sequence[Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _to(tensor: Tensor, device: torch.device, index: int) -> Tensor:
    """Tensor on device ``index``: the first device uses it as is, every other gets a copy."""
    return tensor if index == 0 else tensor.to(device, copy=True)


# ---- 1. scatter -------------------------------------------------------------------------------

def chunk_sizes(n: int, parts: int) -> list[int]:
    """Row counts of ``torch.chunk(x, parts)`` for ``n`` rows: ``⌈n/parts⌉`` each, the last
    one shorter, and fewer than ``parts`` chunks when the rows run out (5 rows, 4 parts →
    ``[2, 2, 1]``)."""
    if n < 1 or parts < 1:
        raise ValueError(f"cannot split {n} rows into {parts} chunks: both must be >= 1")
    size = -(-n // parts)
    return [min(size, n - start) for start in range(0, n, size)]


class Scatter(torch.autograd.Function):
    """Chunks of a tensor on the devices; backward gathers the gradient chunks back."""

    @staticmethod
    def forward(ctx: Any, devices: Sequence[torch.device], dim: int,
                trace: Trace | None, tensor: Tensor) -> tuple[Tensor, ...]:
        ctx.dim, ctx.source = dim, tensor.device
        chunks = tensor.chunk(len(devices), dim)
        out = []
        for i, chunk in enumerate(chunks):
            with _span(trace, i, "memcpy", f"scatter 0->{i}", _nbytes([chunk]) if i else 0):
                out.append(_to(chunk, devices[i], i))
        return tuple(out)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[Any, ...]:
        return (None, None, None, torch.cat([g.to(ctx.source) for g in grads], ctx.dim))


def scatter(tensor: Tensor, devices: Sequence[DeviceLike], dim: int = 0,
            trace: Trace | None = None) -> tuple[Tensor, ...]:
    """Cut ``tensor`` along ``dim`` by :func:`chunk_sizes` and put chunk ``i`` on device ``i``.

    Returns as many chunks as ``torch.chunk`` makes (possibly fewer than devices).
    """
    devs = [torch.device(d) for d in devices]
    chunk_sizes(tensor.size(dim), len(devs))  # a clear error for an empty batch
    return Scatter.apply(devs, dim, trace, tensor)  # type: ignore[no-untyped-call,no-any-return]


# ---- 2. replicate -----------------------------------------------------------------------------

def reduce_add(tensors: Sequence[Tensor | None], device: torch.device,
               trace: Trace | None = None, name: str = "reduce_add") -> Tensor | None:
    """Sum tensors living on several devices onto ``device`` (the first one's is used as is).

    ``None`` entries (a replica that did not use the parameter) are skipped.
    """
    total: Tensor | None = None
    for i, t in enumerate(tensors):
        if t is None:
            continue
        with _span(trace, i, "memcpy", f"{name} {i}->0", _nbytes([t]) if i else 0):
            here = _to(t, device, i)
        if total is None:
            total = here
            continue
        with _span(trace, 0, "reduce", f"{name} +{i}", _nbytes([t])):
            total = total + here if total is tensors[0] else total.add_(here)
    return total


class Broadcast(torch.autograd.Function):
    """Parameters copied from the first device to every device; backward sums the copies'
    gradients onto the first device (``reduce_add``): the gradient reduction of DP."""

    @staticmethod
    def forward(ctx: Any, devices: Sequence[torch.device], trace: Trace | None,
                *tensors: Tensor) -> tuple[Tensor, ...]:
        ctx.devices, ctx.trace, ctx.count = devices, trace, len(tensors)
        # An unused parameter keeps grad None, as on one device (PyTorch's Broadcast lets
        # autograd fill in zeros instead).
        ctx.set_materialize_grads(False)
        out: list[Tensor] = []
        for i, device in enumerate(devices):
            with _span(trace, i, "memcpy", f"replicate 0->{i}", _nbytes(tensors) if i else 0):
                out.extend(_to(t, device, i) for t in tensors)
        frozen = [o for k, o in enumerate(out) if not tensors[k % len(tensors)].requires_grad]
        ctx.mark_non_differentiable(*frozen)  # a frozen parameter's copies need no gradient
        return tuple(out)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor | None) -> tuple[Any, ...]:
        n = ctx.count
        sums = [reduce_add(grads[k::n], ctx.devices[0], ctx.trace) for k in range(n)]
        return (None, None, *sums)


def _shallow_copy(module: nn.Module) -> nn.Module:
    """A module object sharing ``module``'s attributes, with its own parameter, buffer and
    child tables (filled in by :func:`replicate`)."""
    replica = module.__new__(type(module))
    replica.__dict__ = module.__dict__.copy()
    replica._parameters = {}
    replica._buffers = module._buffers.copy()
    replica._modules = module._modules.copy()
    return replica


def replicate(module: nn.Module, devices: Sequence[DeviceLike],
              trace: Trace | None = None) -> list[nn.Module]:
    """One copy of ``module`` per device, its tensors copied from the first device.

    Parameters go through :class:`Broadcast`, so gradients flow back to the originals; in a
    replica they are no longer leaves, hence plain attributes instead of ``Parameter``\\ s.
    Buffers are copied without gradient (replica 0 uses the originals, so in-place buffer
    updates such as BatchNorm's running statistics survive only from the first device, as in
    PyTorch). Shared (tied) parameters stay shared inside each replica.
    """
    devs = [torch.device(d) for d in devices]
    params = list(dict.fromkeys(module.parameters()))  # unique, in order: tied weights once
    buffers = list(dict.fromkeys(module.buffers()))
    if params and torch.is_grad_enabled():
        flat = Broadcast.apply(devs, trace, *params)  # type: ignore[no-untyped-call]
    else:
        flat = tuple(_to(t, d, i) for i, d in enumerate(devs) for t in params)
    flat_buffers: list[Tensor] = []
    for i, d in enumerate(devs):
        with _span(trace, i, "memcpy", f"buffers 0->{i}", _nbytes(buffers) if i else 0):
            flat_buffers.extend(_to(b.detach(), d, i) for b in buffers)
    param_index = {id(p): k for k, p in enumerate(params)}
    buffer_index = {id(b): k for k, b in enumerate(buffers)}
    replicas = []
    for j in range(len(devs)):
        copies = {id(m): _shallow_copy(m) for m in module.modules()}
        for m in module.modules():
            replica = copies[id(m)]
            for name, child in m._modules.items():
                replica._modules[name] = None if child is None else copies[id(child)]
            for name, p in m._parameters.items():
                value = None if p is None else flat[j * len(params) + param_index[id(p)]]
                object.__setattr__(replica, name, value)  # a plain attribute, not a leaf
            for name, b in m._buffers.items():
                if b is not None:
                    replica._buffers[name] = flat_buffers[j * len(buffers) + buffer_index[id(b)]]
        replicas.append(copies[id(module)])
    return replicas


# ---- 3. parallel apply ------------------------------------------------------------------------

def parallel_apply(replicas: Sequence[nn.Module], inputs: Sequence[tuple[Tensor, ...]],
                   devices: Sequence[DeviceLike], trace: Trace | None = None) -> list[Tensor]:
    """Run ``replicas[i](*inputs[i])`` on device ``i``, one thread per replica; join them all.

    Grad mode is carried into the threads (it is thread-local in PyTorch). A replica that
    raises makes this raise, naming the replica.
    """
    if not len(replicas) == len(inputs) <= len(devices):
        raise ValueError(f"{len(replicas)} replicas, {len(inputs)} inputs, "
                         f"{len(devices)} devices: need replicas == inputs <= devices")
    devs = [torch.device(d) for d in devices]
    results: list[Any] = [None] * len(replicas)
    grad_enabled = torch.is_grad_enabled()

    def worker(i: int) -> None:
        try:
            on_device = torch.cuda.device(devs[i]) if devs[i].type == "cuda" else nullcontext()
            with torch.set_grad_enabled(grad_enabled), on_device, \
                    _span(trace, i, "compute", f"forward {i}"):
                results[i] = replicas[i](*inputs[i])
        except Exception as exc:  # re-raised in the caller's thread below
            results[i] = exc

    if len(replicas) == 1:
        worker(0)
    else:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(replicas))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for i, r in enumerate(results):
        if isinstance(r, Exception):
            raise RuntimeError(f"replica {i} on {devs[i]} failed: {r}") from r
    return results


# ---- 4. gather --------------------------------------------------------------------------------

class Gather(torch.autograd.Function):
    """Outputs concatenated on the target device; backward scatters the gradient back."""

    @staticmethod
    def forward(ctx: Any, target: torch.device, dim: int, trace: Trace | None,
                *outputs: Tensor) -> Tensor:
        ctx.dim, ctx.trace = dim, trace
        ctx.sizes = [o.size(dim) for o in outputs]
        ctx.devices = [o.device for o in outputs]
        with _span(trace, 0, "memcpy", "gather", _nbytes(outputs)):
            return torch.cat([o.to(target) for o in outputs], dim)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Any, ...]:
        grads = []
        for i, g in enumerate(torch.split(grad, ctx.sizes, ctx.dim)):
            with _span(ctx.trace, i, "memcpy", f"scatter grad 0->{i}",
                       _nbytes([g]) if i else 0):
                grads.append(_to(g, ctx.devices[i], i))
        return (None, None, None, *grads)


def gather(outputs: Sequence[Tensor], target_device: DeviceLike, dim: int = 0,
           trace: Trace | None = None) -> Tensor:
    """Concatenate the replicas' outputs along ``dim`` on ``target_device``."""
    target = torch.device(target_device)
    return Gather.apply(target, dim, trace, *outputs)  # type: ignore[no-untyped-call,no-any-return]


# ---- the module -------------------------------------------------------------------------------

class DataParallel(nn.Module):
    """``torch.nn.DataParallel``'s algorithm: scatter, replicate, parallel apply, gather.

    Args:
        module: the model, on ``devices[0]``; its parameters there are the only real ones.
        devices: one entry per replica, e.g. ``["cuda:0", "cuda:1"]`` or ``["cpu"] * 4``
            (default: :func:`backends.device.local_devices`, every visible GPU, else the CPU).
            The first is where outputs are gathered.
        dim: the batch dimension scattered and gathered.

    ``trace``, when set to a :class:`~simulator.core.engine.Trace`, receives a span per step
    with the device index as the rank (spans of the backward land there too).
    """

    def __init__(self, module: nn.Module, devices: Sequence[DeviceLike] | None = None,
                 dim: int = 0) -> None:
        super().__init__()
        self.module = module
        self.devices = [torch.device(d) for d in devices] if devices else local_devices()
        self.dim = dim
        self.trace: Trace | None = None
        for t in [*module.parameters(), *module.buffers()]:
            if t.device.type != self.devices[0].type or (
                    t.device.index is not None and t.device != self.devices[0]):
                raise ValueError(f"module tensors must be on the first device "
                                 f"{self.devices[0]}, found one on {t.device}")

    def forward(self, *inputs: Tensor) -> Tensor:
        """Scatter each input, replicate the module, run the replicas, gather the outputs."""
        if not inputs:
            raise ValueError("DataParallel needs at least one input tensor to scatter")
        chunked = [scatter(x, self.devices, self.dim, self.trace) for x in inputs]
        per_replica = list(zip(*chunked, strict=True))
        if len(self.devices) == 1:
            return self.module(*per_replica[0])  # type: ignore[no-any-return]
        used = self.devices[:len(per_replica)]
        replicas = replicate(self.module, used, self.trace)
        outputs = parallel_apply(replicas, per_replica, used, self.trace)
        return gather(outputs, self.devices[0], self.dim, self.trace)
