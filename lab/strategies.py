"""Strategy twins: a chapter's whole system, predicted and measured over the parameter the
chapter teaches.

A collective's twin (:mod:`lab.twins`) sweeps message sizes. A training strategy — ZeRO,
DataParallel, DDP, a pipeline — is swept instead over the knob its chapter is about: the ZeRO
model's size, the number of replicas, the bucket size, the micro-batches. A
:class:`StrategyTwin` names that knob (``parameter``) and its default and quick values
(``points``), and runs one comparison per world size: for each point the simulated twin's
prediction (from the calibration and one-process profiles, never from a measurement of the
strategy itself) beside the real twin's measured median, p10 and p90.

Every row it returns carries the comparison fields of :class:`lab.records.Record` — ``twin``,
``world``, ``bytes``, ``predicted_s``, ``measured_median_s``, ``measured_p10_s``,
``measured_p90_s``, ``rel_error`` — plus ``point`` (``{parameter: value}``) and, where the
chapter is about memory, ``predicted_peak_bytes`` and ``measured_peak_bytes``.

Chapters add theirs with :func:`register`; ``distml-lab list`` shows them beside the
collectives, and ``distml-lab compare NAME`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Comparison = Callable[[int, Sequence[Any], int, "str | Path | None"], list[dict[str, Any]]]
"""``(world, points, repeats, calibration) -> rows``: one comparison at one world size."""

FIELDS = ("twin", "world", "point", "bytes", "predicted_s", "measured_median_s",
          "measured_p10_s", "measured_p90_s", "rel_error")
"""The fields every row of a strategy twin has (besides its own)."""


@dataclass(frozen=True)
class StrategyTwin:
    """A training strategy's simulated and real twin, swept over ``parameter``."""

    name: str
    chapter: str
    summary: str
    parameter: str
    points: tuple[Any, ...]
    quick_points: tuple[Any, ...]
    compare: Comparison
    worlds: tuple[int, ...] = (2,)
    quick_worlds: tuple[int, ...] = (2,)
    min_world: int = 2
    max_world: int = 4
    memory: bool = False
    calibrated: bool = True
    """Whether the prediction reads this machine's calibration (DataParallel's does not: it
    measures its own primitives on one thread)."""
    world_unit: str = "ranks"
    """What ``--world`` counts for this twin (``ranks``; ``workers`` of a parameter server,
    ``replicas`` of DataParallel)."""
    ranks: Callable[[int, Any], int] | None = None
    """Processes a point runs at world ``world`` (``None``: ``world``) — the world sizes that
    are calibrated before a comparison (a parameter server adds a scheduler and servers)."""

    def processes(self, world: int, point: Any) -> int:
        """How many processes ``point`` starts at ``world``."""
        return world if self.ranks is None else self.ranks(world, point)

    def describe(self) -> dict[str, Any]:
        """A plain-dict summary (``distml-lab list --json``)."""
        return {"name": self.name, "chapter": self.chapter, "summary": self.summary,
                "kind": "strategy", "parameter": self.parameter, "points": list(self.points),
                "quick_points": list(self.quick_points), "worlds": list(self.worlds),
                "quick_worlds": list(self.quick_worlds), "min_world": self.min_world,
                "memory": self.memory}


STRATEGIES: dict[str, StrategyTwin] = {}
"""Every registered strategy twin by name; chapters register theirs in ``lab/strategies_*.py``,
which :func:`all_strategies` imports."""


def register(twin: StrategyTwin) -> StrategyTwin:
    """Add a strategy twin (names are unique)."""
    if twin.name in STRATEGIES:
        raise ValueError(f"strategy twin {twin.name!r} is registered twice")
    STRATEGIES[twin.name] = twin
    return twin


def all_strategies() -> list[StrategyTwin]:
    """Every registered strategy twin, in chapter order (then in registration order): the
    modules ``lab/strategies_*.py`` are imported first."""
    import importlib

    for path in sorted(Path(__file__).parent.glob("strategies_*.py")):
        importlib.import_module(f"lab.{path.stem}")
    return sorted(STRATEGIES.values(), key=lambda t: _first_chapter(t.chapter))


def _first_chapter(chapter: str) -> int:
    """``"5-6"`` → 5: a twin's place in the book."""
    return int(chapter.partition("-")[0])


def get_strategy(name: str) -> StrategyTwin | None:
    """The strategy twin called ``name``, or ``None``."""
    return {t.name: t for t in all_strategies()}.get(name)


def row(twin: StrategyTwin, world: int, value: Any, predicted_s: float,
        measured: dict[str, float], nbytes: int = 0, **extra: Any) -> dict[str, Any]:
    """One comparison row: ``measured`` holds ``median_s``, ``p10_s`` and ``p90_s``; ``nbytes``
    is what the point moves or holds (parameters' bytes, say), 0 where it has no size."""
    median = measured["median_s"]
    return {"twin": twin.name, "world": world, "point": {twin.parameter: value},
            "bytes": nbytes, "predicted_s": predicted_s, "measured_median_s": median,
            "measured_p10_s": measured["p10_s"], "measured_p90_s": measured["p90_s"],
            "rel_error": (predicted_s - median) / median, **extra}


def run_comparison(twin: StrategyTwin, worlds: Sequence[int], points: Sequence[Any],
                   repeats: int, calibration: str | Path | None = None
                   ) -> list[dict[str, Any]]:
    """The twin's rows for every world size, in order."""
    return [r for world in worlds for r in twin.compare(world, points, repeats, calibration)]
