"""A small Horovod on ``torch.distributed``: the real twin of book chapter 7.

Sergeev, A., and Del Balso, M. (2018). Horovod: fast and easy distributed deep learning in
TensorFlow. arXiv:1802.05799. The mechanisms and names follow Horovod's source, which was read
(never copied): ``horovod/common/operations.cc`` (the background thread), ``controller.cc``
(negotiation and fusion), ``response_cache.cc``, ``stall_inspector.cc``, ``tensor_queue.cc``,
``horovod/torch/mpi_ops.py``, ``horovod/torch/optimizer.py``, ``horovod/torch/functions.py``.

Use it as Horovod's PyTorch binding::

    import backends.horovod as hvd

    hvd.init()                        # or init(cycle_time_ms=5, fusion_threshold_bytes=2**20)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size()),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    ...                               # loss.backward(); opt.step()
    hvd.shutdown()

Modules: :mod:`~backends.horovod.basics` (``init``, ranks, settings),
:mod:`~backends.horovod.ops` (the collectives and handles),
:mod:`~backends.horovod.background` (the background thread's cycle),
:mod:`~backends.horovod.negotiation` (coordinator, bit vector, stall inspector),
:mod:`~backends.horovod.messages` (requests, responses), :mod:`~backends.horovod.response_cache`,
:mod:`~backends.horovod.fusion` (``fuse_responses``, the fusion buffer),
:mod:`~backends.horovod.optimizer` (``DistributedOptimizer``, broadcasts);
``horovodrun`` is :mod:`backends.horovod.runner`.

Measuring the engine: :func:`stats` (counters since ``init`` or :func:`reset_stats`) and
:func:`timeline` (the background thread's spans, with ``init(timeline=True)``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below are loaded on first use (the launcher needs no torch)
    from backends.horovod.background import HorovodInternalError
    from backends.horovod.basics import (
        Settings,
        cross_rank,
        cross_size,
        init,
        is_initialized,
        local_rank,
        local_size,
        rank,
        read_settings,
        settings,
        shutdown,
        size,
    )
    from backends.horovod.fusion import fuse_responses
    from backends.horovod.ops import (
        Average,
        Sum,
        allreduce,
        allreduce_,
        allreduce_async,
        allreduce_async_,
        broadcast,
        broadcast_,
        broadcast_async,
        broadcast_async_,
        broadcast_object,
        poll,
        synchronize,
    )
    from backends.horovod.optimizer import (
        DistributedOptimizer,
        broadcast_optimizer_state,
        broadcast_parameters,
    )
    from simulator.core.engine import Trace

_WHERE = {
    "HorovodInternalError": "background",
    **dict.fromkeys(["Settings", "cross_rank", "cross_size", "init", "is_initialized",
                     "local_rank", "local_size", "rank", "read_settings", "settings",
                     "shutdown", "size"], "basics"),
    "fuse_responses": "fusion",
    **dict.fromkeys(["Average", "Sum", "allreduce", "allreduce_", "allreduce_async",
                     "allreduce_async_", "broadcast", "broadcast_", "broadcast_async",
                     "broadcast_async_", "broadcast_object", "poll", "synchronize"], "ops"),
    **dict.fromkeys(["DistributedOptimizer", "broadcast_optimizer_state",
                     "broadcast_parameters"], "optimizer"),
}


def __getattr__(name: str) -> Any:
    """Load the public names lazily, so that ``backends.horovod.runner`` needs no torch."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'backends.horovod' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"backends.horovod.{module}"), name)
    globals()[name] = value
    return value


def stats() -> dict[str, Any]:
    """The background thread's counters since ``init`` (or :func:`reset_stats`).

    Keys: ``cycles``, ``coordinator_rounds`` (cycles negotiated through rank 0),
    ``cache_hits`` (tensors agreed through the response cache), ``allreduces`` (collectives
    run, one per fused response), ``tensors_allreduced``, ``allreduce_bytes`` (bytes of each
    all-reduce, in order), ``fused`` (``(cycle, dtype, names)`` of each all-reduce),
    ``broadcasts``, ``errors``, and the settings in force: ``cycle_time_ms`` and
    ``fusion_threshold_bytes`` (effective, after Horovod's rounding).
    """
    from backends.horovod.basics import engine

    eng = engine()
    out: dict[str, Any] = eng.stats.snapshot()
    out["cycle_time_ms"] = eng.cycle_time_s * 1000.0
    out["fusion_threshold_bytes"] = eng.controller.threshold
    return out


def reset_stats() -> None:
    """Zero the counters (call it on every rank between experiments)."""
    from backends.horovod.background import Stats
    from backends.horovod.basics import engine

    eng = engine()
    eng.stats = Stats(cycles=eng.stats.cycles)
    eng.controller.coordinator_rounds = 0
    eng.controller.cache_hits = 0


def timeline(clear: bool = False) -> Trace:
    """This rank's background-thread spans so far (empty unless ``init(timeline=True)``).

    Kinds: ``WAIT``, ``NEGOTIATE``, ``MEMCPY_IN_FUSION_BUFFER``, ``ALLREDUCE``,
    ``MEMCPY_OUT_FUSION_BUFFER``, ``BROADCAST`` (background thread; names ``"cycle N"`` or
    ``"cycle N: tensor names"``), and instants ``ENQUEUE`` (framework thread; name = the
    tensor's full name, e.g. ``allreduce.0.weight``, nbytes = its size); times from
    ``time.perf_counter`` (shared by the processes of a machine), so ranks' traces can be
    merged and shifted together.
    """
    from backends.horovod.basics import engine
    from simulator.core.engine import Trace

    eng = engine()
    trace = Trace(list(eng.tracer.trace.spans))
    if clear:
        eng.tracer.trace.spans.clear()
    return trace


__all__ = [
    "Average", "DistributedOptimizer", "HorovodInternalError", "Settings", "Sum", "allreduce",
    "allreduce_", "allreduce_async", "allreduce_async_", "broadcast", "broadcast_",
    "broadcast_async", "broadcast_async_", "broadcast_object", "broadcast_optimizer_state",
    "broadcast_parameters", "cross_rank", "cross_size", "fuse_responses", "init",
    "is_initialized", "local_rank", "local_size", "poll", "rank", "read_settings",
    "reset_stats", "settings", "shutdown", "size", "stats", "synchronize", "timeline",
]
