"""This host: the CPU cores a process may use and how busy other programs keep them.

On a shared machine the noise to report beside a measurement is the CPU time *other*
programs used meanwhile: :func:`host_busy_s` (``/proc/stat``) minus our own processes' CPU
time; :func:`quietly` measures it around one call.

Units: seconds, cores.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any


def host_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def host_busy_s() -> float:
    """CPU seconds all cores of this host have been busy since boot (``/proc/stat``; NaN
    elsewhere). Its growth minus our ranks' own CPU time is what *other* programs used while
    we measured — on a shared machine, the noise to report beside the numbers."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return math.nan
    ticks = [int(f) for f in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children."""
    usage = os.times()
    return usage.children_user + usage.children_system


def quietly(fn: Any, *args: Any) -> tuple[Any, float]:
    """``fn(*args)``, and the share of the host's CPU other programs used meanwhile (ours
    includes the CPU time of the processes ``fn`` spawned)."""
    busy, cpu, wall = host_busy_s(), time.process_time(), time.perf_counter()
    children = _children_cpu_s()
    out = fn(*args)
    busy = host_busy_s() - busy
    cpu = time.process_time() - cpu + _children_cpu_s() - children
    return out, max(busy - cpu, 0.0) / ((time.perf_counter() - wall) * host_cores())
