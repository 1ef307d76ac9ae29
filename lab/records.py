"""A comparison's records: one point each (prediction, measurement, error), their summary, and
how they are written (CSV and JSON, atomically)."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from simulator.core.atomic import write_atomic


@dataclass(frozen=True)
class Record:
    """One point of a comparison (times in s, sizes in bytes)."""

    twin: str
    world: int
    bytes: int
    predicted_s: float
    measured_median_s: float
    measured_p10_s: float
    measured_p90_s: float
    rel_error: float
    closed_form_s: float | None = None
    cluster: str = "local"
    count: int = 0
    dtype: str = "uint8"
    redop: str = "none"
    root: int = 0
    algbw_GBps: float = 0.0
    busbw_GBps: float = 0.0
    builtin_median_s: float | None = None
    builtin_busbw_GBps: float | None = None
    calls: int = 1
    model: str = "host"
    """The tier of ``predicted_s`` (``textbook`` or ``host``), ``both`` when the row also
    holds each tier's prediction and error below (``None`` otherwise)."""
    predicted_textbook_s: float | None = None
    rel_error_textbook: float | None = None
    predicted_host_s: float | None = None
    rel_error_host: float | None = None


def median_abs_error(records: Sequence[Any], model: str | None = None) -> float:
    """Median over points of |rel_error| — of tier ``model``'s ``rel_error_{model}`` where
    given (records of both tiers) — for :class:`Record` objects or row dicts (NaN for no
    points)."""
    key = "rel_error" if model is None else f"rel_error_{model}"
    errors = [(r if isinstance(r, dict) else asdict(r)).get(key) for r in records]
    found = [abs(e) for e in errors if e is not None]
    return statistics.median(found) if found else math.nan


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Rows of dicts as CSV, written atomically (:func:`simulator.core.atomic.write_atomic`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = io.StringIO(newline="")
    if rows:
        writer = csv.DictWriter(text, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_atomic(path, text.getvalue())
    return path


def write_json(doc: Any, path: Path) -> Path:
    """A JSON document, written atomically (:func:`simulator.core.atomic.write_atomic`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(doc, indent=2))
    return path


def records_as_dicts(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Records as plain dicts, in the ``--json`` field order."""
    return [asdict(r) for r in records]
