"""Recording real spans in the simulator's trace schema.

A :class:`Tracer` is the real twin of the spans :class:`simulator.core.SimComm` records: the
same (rank, kind, name, start, end, bytes) rows, so :func:`lab.plots.timelines` draws a
predicted and a measured timeline with one function. Times come from ``time.perf_counter``,
which on Linux is one monotonic clock shared by all processes of a machine; traces are shifted
to start at 0 before plotting.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import torch.distributed as dist

from simulator.core.engine import Trace


class Tracer:
    """Collects spans of one rank; ``gather()`` brings every rank's spans to all ranks."""

    def __init__(self, rank: int | None = None, enabled: bool = True) -> None:
        from backends.device import synchronizer

        self.rank = dist.get_rank() if rank is None else rank
        self.enabled = enabled
        self.trace = Trace()
        self._synchronize = synchronizer()  # on a GPU a span ends when its kernels have run

    @contextmanager
    def span(self, kind: str, name: str, nbytes: int = 0) -> Iterator[None]:
        """Time the ``with`` block as one span."""
        if not self.enabled:
            yield
            return
        self._synchronize()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._synchronize()
            self.trace.record(self.rank, kind, name, start, time.perf_counter(), nbytes)

    def gather(self) -> Trace:
        """All ranks' spans in one trace (a collective: every rank must call it)."""
        parts: list[list[dict[str, object]] | None] = [None] * dist.get_world_size()
        dist.all_gather_object(parts, self.trace.to_records())
        return Trace.from_records(r for part in parts for r in (part or []))


def span(tracer: Tracer | None, kind: str, name: str,
         nbytes: int = 0) -> AbstractContextManager[None]:
    """``tracer.span(...)``, or a no-op when ``tracer`` is ``None`` (untraced runs)."""
    return nullcontext() if tracer is None else tracer.span(kind, name, nbytes)
