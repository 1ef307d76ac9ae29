"""Plain-text tables for terminals and notebooks: sizes in binary units, times in µs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.units import format_size


def format_table(rows: list[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """A fixed-width text table; ``columns`` are (key, header). Times print in µs."""

    def cell(key: str, value: Any) -> str:
        if value is None:
            return "-"
        if key == "bytes":
            return format_size(value)
        if key.endswith("_s"):
            return f"{value * 1e6:.1f}"
        if key == "rel_error":
            return f"{value:+.1%}"
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value)

    headers = [h for _, h in columns]
    body = [[cell(k, row.get(k)) for k, _ in columns] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)
