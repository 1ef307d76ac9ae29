"""Bounded work: estimate a simulation before starting it, refuse what would not fit, show
progress on what takes a while.

Every ``distml-lab plan`` and ``distml-lab simulate MODEL`` sizes its work first — seconds from
measured costs per unit of work (constants beside each command, with their units), bytes
likewise — and refuses, in one line with exit status 2 (:class:`~lab.units.UsageError`), what
would take longer than ``--budget-s`` or need more memory than the machine has available. The
line says the limit and what to use instead. Work estimated above :data:`PROGRESS_AFTER_S`
shows a progress bar on stderr (tqdm), silent with ``--json`` unless ``--progress``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lab.checks import available_memory_bytes
from lab.units import UsageError, format_size, number

DEFAULT_BUDGET_S = 60.0
"""Seconds of simulation a command starts by default (``--budget-s``)."""
PROGRESS_AFTER_S = 2.0
"""Work estimated to take longer than this, s, shows a progress bar on stderr."""


def budget_argument(p: argparse.ArgumentParser) -> None:
    """``--budget-s``: the most seconds of simulation a command may start."""
    p.add_argument("--budget-s", type=number(0, 86400, lo_open=True), default=DEFAULT_BUDGET_S,
                   help="refuse work estimated to take longer, s (default "
                        f"{DEFAULT_BUDGET_S:g})")


def available_bytes() -> float:
    """Memory this machine can still give, bytes (``MemAvailable``; ``inf`` where unknown)."""
    free = available_memory_bytes()
    return float("inf") if free is None else float(free)


def check_budget(args: argparse.Namespace, seconds: float, nbytes: float, command: str,
                 instead: str) -> None:
    """Refuse (one line) ``command`` if its estimate, ``seconds`` and ``nbytes``, exceeds
    ``args.budget_s`` or the memory available; ``instead`` says what to use instead."""
    free = available_bytes()
    if nbytes > free:
        raise UsageError(f"{command} would need about {format_size(nbytes)} of memory, more "
                         f"than the {format_size(free)} available; use {instead}")
    if seconds > args.budget_s:
        raise UsageError(f"{command} would take about {seconds:.0f} s, over --budget-s "
                         f"{args.budget_s:g}; use {instead}, or raise --budget-s")


def show_progress(args: argparse.Namespace, estimate_s: float) -> bool:
    """Whether a bar is shown: long work, and ``--json`` only with ``--progress``."""
    quiet = getattr(args, "json", False) and not getattr(args, "progress", False)
    return not quiet and estimate_s >= PROGRESS_AFTER_S


@contextmanager
def elapsed_bar(args: argparse.Namespace, desc: str, estimate_s: float) -> Iterator[Any]:
    """A bar on stderr for one indivisible simulation: the seconds elapsed against the
    estimate, refreshed twice a second by a helper thread (nothing inside reports)."""
    from tqdm import tqdm

    bar = tqdm(total=round(estimate_s, 1), desc=desc, unit="s", file=sys.stderr, leave=False,
               disable=not show_progress(args, estimate_s),
               bar_format="{desc}: {n:.1f}/{total:.0f} s estimated |{bar}|")
    done = threading.Event()

    def tick() -> None:
        start = time.monotonic()
        while not done.wait(0.5):
            bar.n = round(time.monotonic() - start, 1)
            bar.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    if not bar.disable:
        thread.start()
    try:
        yield bar
    finally:
        done.set()
        if thread.is_alive():
            thread.join()
        bar.close()
