"""Strategy twins: a chapter's whole system, predicted and measured over the parameter the
chapter teaches.

A collective's twin (:mod:`lab.twins`) sweeps message sizes. A training strategy — ZeRO,
DataParallel, DDP, a pipeline — is swept instead over the knob its chapter is about: the ZeRO
model's size, the number of replicas, the bucket size, the micro-batches. A
:class:`StrategyTwin` names that knob (``parameter``) and its default and quick values
(``points``), and runs one comparison per world size: for each point the simulated twin's
prediction (from the calibration and one-process profiles, never from a measurement of the
strategy itself) beside the real twin's measured median, p10 and p90.

A twin is two functions: :data:`Predict` (the simulated twin, in one or both model tiers) and
:data:`Measure` (the real twin). ``distml-lab simulate`` calls the first, ``run`` the second,
``compare`` and ``report`` both, merged into rows with the comparison fields of
:class:`lab.records.Record` — ``twin``, ``world``, ``bytes``, ``predicted_s``,
``measured_median_s``, ``measured_p10_s``, ``measured_p90_s``, ``rel_error`` — plus ``point``
(``{parameter: value}``), ``model`` and, where the chapter is about memory,
``predicted_peak_bytes`` and ``measured_peak_bytes``.

Chapters add theirs with :func:`register`; ``distml-lab list`` shows them beside the
collectives, and ``distml-lab compare NAME`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.core.calibration import Calibration
    from simulator.core.engine import Trace

Predict = Callable[[int, Sequence[Any], "Calibration", Sequence[str]], list[dict[str, Any]]]
"""``(world, points, calibration, models) -> rows``: the simulated twin at one world size, one
row per point in order. A row holds ``predicted`` (``{model: seconds}`` for each of ``models``,
tiers of :data:`simulator.host.factory.MODELS`), optionally ``bytes`` and ``predicted_peak_bytes``,
and any prediction-side fields of the chapter's own (buckets, bubble …). It reads the
calibration and one-process profiles only, never a measurement of the strategy itself."""

Measure = Callable[[int, Sequence[Any], int], list[dict[str, Any]]]
"""``(world, points, repeats) -> rows``: the real twin at one world size, one row per point in
order, each with ``median_s``, ``p10_s`` and ``p90_s`` (s), optionally ``bytes`` and
``measured_peak_bytes``, and any measured fields of the chapter's own (PyTorch's time …)."""

Timeline = Callable[[int, Any, "Calibration", str], "tuple[Trace, Trace | None]"]
"""``(world, point, calibration, model) -> (predicted, measured)``: one step of the twin at one
point as timelines in the simulator's trace schema (:class:`simulator.core.engine.Trace`,
seconds): the simulated step in tier ``model`` and the real step's spans recorded by
:class:`backends.trace.Tracer` (``None`` where the real twin records no spans). The report
draws both with :func:`lab.plots.timelines`."""

FIELDS = ("twin", "world", "point", "bytes", "model", "predicted_s", "measured_median_s",
          "measured_p10_s", "measured_p90_s", "rel_error")
"""The fields every comparison row of a strategy twin has (besides its own). ``predicted_s``
and ``rel_error`` are the host tier's where it was predicted (else the textbook's); with both
tiers a row also has ``predicted_textbook_s``, ``rel_error_textbook``, ``predicted_host_s`` and
``rel_error_host``."""


@dataclass(frozen=True)
class StrategyTwin:
    """A training strategy's simulated and real twin, swept over ``parameter``."""

    name: str
    chapter: str
    summary: str
    parameter: str
    points: tuple[Any, ...]
    quick_points: tuple[Any, ...]
    predict: Predict
    measure: Measure
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
    select: Callable[[int, Sequence[Any]], list[Any]] | None = None
    """The points of a sweep that run at world ``world`` (``None``: all of them; Megatron's
    grids run only where ``t·p·d = world``)."""

    timeline: Timeline | None = None
    """One step's predicted and measured timelines (``None``: the twin draws none)."""

    def points_at(self, world: int, points: Sequence[Any]) -> list[Any]:
        """The points of ``points`` that run at ``world`` (:attr:`select`)."""
        return list(points) if self.select is None else self.select(world, points)

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
    return sorted(STRATEGIES.values(), key=lambda t: first_chapter(t.chapter))


def first_chapter(chapter: str) -> int:
    """``"5-6"`` → 5: a twin's place in the book."""
    return int(chapter.partition("-")[0])


def get_strategy(name: str) -> StrategyTwin | None:
    """The strategy twin called ``name``, or ``None``."""
    return {t.name: t for t in all_strategies()}.get(name)


def _predicted_row(twin: StrategyTwin, world: int, point: Any, predicted: dict[str, Any],
                   models: Sequence[str]) -> dict[str, Any]:
    """A :data:`Predict` row of one point as a record: ``predicted_s`` the shown tier's
    (:func:`~simulator.host.factory.shown_tier`), each tier's beside it with both."""
    from simulator.host.factory import shown_tier

    seconds = predicted["predicted"]
    chosen = shown_tier(seconds)
    row = {"twin": twin.name, "world": world, "point": {twin.parameter: point},
           "bytes": predicted.get("bytes", 0), "model": "both" if len(models) > 1 else chosen,
           "predicted_s": seconds[chosen]}
    if len(models) > 1:
        row.update({f"predicted_{m}_s": seconds[m] for m in models})
    return {**row, **{k: v for k, v in predicted.items() if k not in ("predicted", "bytes")}}


def _measured_fields(measured: dict[str, Any]) -> dict[str, Any]:
    """A :data:`Measure` row's fields as a record's (``measured_median_s`` …)."""
    return {"measured_median_s": measured["median_s"], "measured_p10_s": measured["p10_s"],
            "measured_p90_s": measured["p90_s"],
            **{k: v for k, v in measured.items()
               if k not in ("median_s", "p10_s", "p90_s", "bytes")}}


def merge(twin: StrategyTwin, world: int, point: Any, predicted: dict[str, Any],
          measured: dict[str, Any], models: Sequence[str]) -> dict[str, Any]:
    """One comparison row from a :data:`Predict` row and a :data:`Measure` row of one point:
    the prediction, the measurement (whose ``bytes`` win), each tier's relative error and,
    where both peaks are known, the peak memory's (``rel_error_peak``)."""
    row = _predicted_row(twin, world, point, predicted, models)
    median = measured["median_s"]
    row["bytes"] = measured.get("bytes", row["bytes"])
    row["rel_error"] = (row["predicted_s"] - median) / median
    if len(models) > 1:
        row.update({f"rel_error_{m}": (row[f"predicted_{m}_s"] - median) / median
                    for m in models})
    row = {**row, **_measured_fields(measured)}
    if row.get("predicted_peak_bytes") and row.get("measured_peak_bytes"):
        row["rel_error_peak"] = ((row["predicted_peak_bytes"] - row["measured_peak_bytes"])
                                 / row["measured_peak_bytes"])
    return row


def prediction_rows(twin: StrategyTwin, world: int, points: Sequence[Any],
                    calibration: Calibration, models: Sequence[str]) -> list[dict[str, Any]]:
    """``distml-lab simulate`` of a strategy twin: the predicted rows at one world size."""
    points = twin.points_at(world, points)
    return [_predicted_row(twin, world, point, p, models)
            for point, p in zip(points, twin.predict(world, points, calibration, models),
                                strict=True)]


def measurement_rows(twin: StrategyTwin, world: int, points: Sequence[Any], repeats: int
                     ) -> list[dict[str, Any]]:
    """``distml-lab run`` of a strategy twin: the measured rows at one world size."""
    points = twin.points_at(world, points)
    return [{"twin": twin.name, "world": world, "point": {twin.parameter: point},
             "bytes": m.get("bytes", 0), **_measured_fields(m)}
            for point, m in zip(points, twin.measure(world, points, repeats), strict=True)]


def run_comparison(twin: StrategyTwin, worlds: Sequence[int], points: Sequence[Any],
                   repeats: int, calibration: Calibration,
                   models: Sequence[str] = ("host",)) -> list[dict[str, Any]]:
    """The twin's comparison rows for every world size, in order: measured first, then
    predicted in every tier of ``models``, merged point by point (:func:`merge`)."""
    rows = []
    for world in worlds:
        at = twin.points_at(world, points)
        measured = twin.measure(world, at, repeats)
        predicted = twin.predict(world, at, calibration, models)
        rows += [merge(twin, world, point, p, m, models)
                 for point, p, m in zip(at, predicted, measured, strict=True)]
    return rows
