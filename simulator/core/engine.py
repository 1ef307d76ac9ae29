"""The trace: what happened when, on which rank.

A *span* is one interval of activity on one rank — a compute kernel, a send, a receive, a local
reduction. Both twins record spans in this one schema (the real twin in
:mod:`backends.trace`), so one plotting function draws predicted and measured timelines, and
both export to the Chrome trace format that Perfetto and ``chrome://tracing`` open.

Times are in seconds, sizes in bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Span:
    """One interval of activity on one rank.

    Attributes:
        rank: the rank it ran on.
        kind: what sort of work: ``compute``, ``send``, ``recv``, ``reduce``, ``memcpy``,
            ``wait``, ``step`` (a whole algorithm step) …
        name: a label for people (``"send 0->1"``, ``"reduce-scatter 3"``).
        start: start time, s.
        end: end time, s.
        nbytes: bytes moved or touched, 0 when not meaningful.
    """

    rank: int
    kind: str
    name: str
    start: float
    end: float
    nbytes: int = 0

    @property
    def duration(self) -> float:
        """Length of the span, s."""
        return self.end - self.start


class Trace:
    """An append-only list of :class:`Span`, in the order they were recorded."""

    def __init__(self, spans: Iterable[Span] = ()) -> None:
        self.spans: list[Span] = list(spans)

    def record(self, rank: int, kind: str, name: str, start: float, end: float,
               nbytes: int = 0) -> None:
        """Append one span (times in s)."""
        self.spans.append(Span(rank, kind, name, start, end, nbytes))

    def __len__(self) -> int:
        return len(self.spans)

    def __iter__(self) -> Iterator[Span]:
        return iter(self.spans)

    def for_rank(self, rank: int) -> list[Span]:
        """The spans of one rank, in recording order."""
        return [s for s in self.spans if s.rank == rank]

    def shifted(self) -> Trace:
        """A copy whose earliest span starts at time 0 (real clocks start anywhere)."""
        if not self.spans:
            return Trace()
        t0 = min(s.start for s in self.spans)
        return Trace(Span(s.rank, s.kind, s.name, s.start - t0, s.end - t0, s.nbytes)
                     for s in self.spans)

    def to_records(self) -> list[dict[str, Any]]:
        """Plain dicts, one per span (for JSON and CSV)."""
        return [asdict(s) for s in self.spans]

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]]) -> Trace:
        """Inverse of :meth:`to_records`."""
        return cls(Span(**r) for r in records)

    def to_chrome(self, process_name: str = "distml-lab") -> dict[str, Any]:
        """The trace as a Chrome trace-event document (``"X"`` complete events, times in µs).

        One thread per rank; open the written file in https://ui.perfetto.dev or
        ``chrome://tracing``.
        """
        events: list[dict[str, Any]] = [
            {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": process_name}}
        ]
        for rank in sorted({s.rank for s in self.spans}):
            events.append({"ph": "M", "pid": 0, "tid": rank, "name": "thread_name",
                           "args": {"name": f"rank {rank}"}})
        for s in self.spans:
            events.append({
                "ph": "X", "pid": 0, "tid": s.rank, "name": s.name, "cat": s.kind,
                "ts": s.start * 1e6, "dur": max(s.duration, 0.0) * 1e6,
                "args": {"bytes": s.nbytes},
            })
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def write_chrome(self, path: str | Path, process_name: str = "distml-lab") -> Path:
        """Write :meth:`to_chrome` as JSON to ``path`` and return the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_chrome(process_name)))
        tmp.replace(path)
        return path
