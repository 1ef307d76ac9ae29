"""The twin registry: each algorithm's simulated twin, real twin and default sweeps, by name.

A :class:`Twin` ties together

* ``simulate(cluster, nbytes, calls=1, trace=True)`` — runs the SimPy rank program (``calls``
  times back to back on every rank, as a benchmark loop does), returns a ``SimResult`` (its
  trace only with ``trace``: a trace of thousands of ranks takes gigabytes);
* ``closed_form(world, nbytes, alpha_s, beta_s_per_B)`` — the textbook formula, where one
  exists;
* ``real_step(nbytes, tracer)`` — *inside a rank* of a real process group, allocates the
  buffers and returns a zero-argument function that runs the algorithm once;
* ``check(nbytes)`` — *inside a rank*: runs the algorithm once and compares its result with
  PyTorch's built-in equivalent (raises if they differ);
* ``builtin_step(nbytes)`` — *inside a rank*: the same operation done by PyTorch's built-in
  collective, timed side by side with ours (collectives only);
* ``operation`` — the collective it implements (``all_reduce`` …), for nccl-tests' busbw;
* ``tour`` — whether ``distml-lab report`` (the newcomer's tour) includes it;
* the default and quick sweeps (world sizes and message sizes, bytes).

``distml-lab list`` prints the registry. Chapters add their twins with :func:`register`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simulator.core.comm import SimResult, run_spmd
from simulator.core.hardware import Cluster

KiB, MiB = 2**10, 2**20


@dataclass(frozen=True)
class Twin:
    """A simulated twin and a real twin of one algorithm, and how to sweep them."""

    name: str
    chapter: str
    summary: str
    simulate: Callable[..., SimResult]
    real_step: Callable[[int, Any], Callable[[], None]]
    check: Callable[[int], None]
    closed_form: Callable[[int, int, float, float, float], float] | None = None
    builtin_step: Callable[[int], Callable[[], None]] | None = None
    operation: str | None = None
    tour: bool = True
    itemsize: int = 1
    dtype: str = "uint8"
    redop: str = "none"
    worlds: tuple[int, ...] = (2,)
    sizes: tuple[int, ...] = tuple(2**k for k in range(16, 27))
    quick_worlds: tuple[int, ...] = (2,)
    quick_sizes: tuple[int, ...] = (64 * KiB, 1 * MiB, 16 * MiB)
    min_world: int = 1

    def describe(self) -> dict[str, Any]:
        """A plain-dict summary (``distml-lab list --json``)."""
        return {"name": self.name, "chapter": self.chapter, "summary": self.summary,
                "operation": self.operation, "builtin": self.builtin_step is not None,
                "closed_form": self.closed_form is not None, "min_world": self.min_world,
                "worlds": list(self.worlds), "sizes": list(self.sizes),
                "quick_worlds": list(self.quick_worlds), "quick_sizes": list(self.quick_sizes)}


TWINS: dict[str, Twin] = {}
TWIN_MODULES = ("lab.twins_p2p", "lab.twins_collectives")
"""The modules that register twins, in the order ``distml-lab list`` shows them."""


def register(twin: Twin) -> Twin:
    """Add a twin to the registry (names are unique)."""
    if twin.name in TWINS:
        raise ValueError(f"twin {twin.name!r} is registered twice")
    TWINS[twin.name] = twin
    return twin


def get_twin(name: str) -> Twin:
    """A twin by name, or ``KeyError`` listing the names there are."""
    _load_all()
    if name not in TWINS:
        raise KeyError(f"unknown twin {name!r}; choose one of {', '.join(sorted(TWINS))}")
    return TWINS[name]


def all_twins() -> list[Twin]:
    """Every registered twin, in registration order."""
    _load_all()
    return list(TWINS.values())


def _load_all() -> None:
    """Import the modules that register twins (once)."""
    for module in TWIN_MODULES:  # registration order is listing order: by chapter
        importlib.import_module(module)


def spmd(program: Callable[..., Any], **kwargs: Any) -> Callable[..., SimResult]:
    """``simulate`` for a rank program taking ``(comm, nbytes, **kwargs)``."""

    def simulate(cluster: Cluster, nbytes: int, calls: int = 1, trace: bool = True
                 ) -> SimResult:
        return run_spmd(cluster, program, nbytes, calls=calls, trace=trace, **kwargs)

    return simulate
