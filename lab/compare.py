"""Prediction beside measurement: run both twins over a sweep and tabulate the error.

For each (world size, message size) point:

* **predicted_s** — the simulated twin on the calibrated local cluster
  (:func:`~simulator.host.factory.local_cluster`), whose parameters were measured on
  primitives only;
* **closed_form_s** — the textbook formula with the same α and β, where one exists;
* **measured_median_s / p10 / p90** — the real twin on real processes
  (:func:`backends.measure.measure`), barrier-aligned repeats;
* **rel_error** — (predicted − measured median) / measured median.

The prediction is :mod:`lab.predict`'s, the records and their files :mod:`lab.records`', the
rank code :mod:`backends.collectives.twin_ranks`' and :mod:`backends.sustained`'; this module
launches the real twins, pairs each measurement with its prediction, and calibrates on first
use.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from backends.collectives import twin_ranks
from lab.predict import check_world, predict
from lab.records import Record
from lab.sustained import measure_sustained
from lab.twins import Twin, get_twin
from simulator.core.calibration import (
    SUSTAINED_REPEAT_S,
    Calibration,
    CalibrationError,
    find_entry,
)
from simulator.core.engine import Trace
from simulator.host.factory import Model, shown_tier

# ---- the real side ------------------------------------------------------------------------

measure_twin = functools.partial(twin_ranks.measure_twin, get_twin)
"""Rank function: :func:`backends.collectives.twin_ranks.measure_twin` finding the twin in the
registry — ``measure_twin(name, sizes, repeats)`` checks the real twin against PyTorch once,
then times each size (bytes), PyTorch's built-in beside it; rows of seconds per call."""


def run_real(twin: Twin, world: int, sizes: Sequence[int], repeats: int = 10,
             backend: str = "gloo", timeout: float = 60.0, network: str = "loopback",
             bandwidth: str | Sequence[str | int] | None = None) -> list[dict[str, Any]]:
    """Measured timings of each size at one world size (one launch for the whole sweep);
    ``network="shaped"`` runs the ranks on shaped links (:mod:`backends.shaped`)."""
    from backends.launch import spawn

    check_world(twin, world)
    return spawn(measure_twin, world, twin.name, list(sizes), repeats, backend=backend,  # type: ignore[no-any-return]
                 timeout=timeout, network=network, bandwidth=bandwidth)[0]


def measured_trace(twin: Twin, world: int, nbytes: int, backend: str = "gloo",
                   network: str = "loopback",
                   bandwidth: str | Sequence[str | int] | None = None) -> Trace:
    """A real run's timeline, shifted to start at 0."""
    from backends.launch import spawn

    records = spawn(twin_ranks.trace_twin, world, get_twin, twin.name, nbytes, backend=backend,
                    network=network, bandwidth=bandwidth)[0]
    return Trace.from_records(records).shifted()


def ensure_calibrated(worlds: Sequence[int], backend: str = "gloo",
                      calibration: str | Path | None = None, quick: bool = False,
                      log: Callable[[str], None] | None = None, network: str = "loopback",
                      bandwidth: str | Sequence[str | int] | None = None) -> None:
    """Calibrate each world size that has no entry yet (one-off, some seconds each), on the
    network the comparison will run on — or whose loopback entry predates a primitive the
    prediction uses (the receive-ready notice, the posting overhead, the chain, the shift
    and — three ranks or more — the swap posted a step ahead, the stream one way, the
    ping-pong's send returns and the reducing shift, :mod:`lab.calibrate`), which would
    otherwise fall back to α, to nothing, to the plain chain and exchanges, to no
    connections, to sends that complete on arrival and to reductions priced by γ alone, or
    was measured under another scheduling policy than the ranks will run under
    (:func:`backends.launch.apply_rank_sched`)."""
    from backends.launch import rank_sched_policy
    from lab.calibrate import calibrate, calibration_sweep
    from simulator.core.shaped import network_key

    key = network_key(network, bandwidth)
    policy = rank_sched_policy()
    for world in sorted(set(worlds)):
        try:
            entry = find_entry(max(world, 2), backend, path=calibration, network=key)
            stale = key == "loopback" and (entry.ready_notice_s is None
                                           or entry.post_overhead_s is None
                                           or not entry.chain_ahead_latency_s
                                           or (bool(entry.exchange_sizes)
                                               and not entry.shift_ahead_times_s)
                                           or (bool(entry.exchange_sizes)
                                               and entry.world_size > 2
                                               and not entry.swap_ahead_times_s)
                                           or (bool(entry.exchange_sizes)
                                               and not (entry.stream_times_s
                                                        and entry.send_return_times_s
                                                        and entry.reduce_ahead_times_s))
                                           or entry.rank_sched != policy)
        except CalibrationError:
            stale = True
        if stale:
            if log:
                log(f"calibrating world {max(world, 2)} first (one-off) ...")
            calibrate(max(world, 2), backend, path=calibration, network=network,
                      bandwidth=bandwidth, progress=log is not None, **calibration_sweep(quick))


def compare(twin: Twin, worlds: Sequence[int], sizes: Sequence[int], repeats: int = 10,
            calibration: Calibration | str | Path | None = None, backend: str = "gloo",
            progress: bool = True, network: str = "loopback",
            bandwidth: str | Sequence[str | int] | None = None,
            models: Sequence[Model] = ("host",)) -> list[Record]:
    """Predict and measure every point; one launch per world size (on ``network``). Each
    point is predicted as it was measured: as many calls back to back as a repeat ran
    (:func:`measure_twin`), time per call — in each tier of ``models`` (the host tier's, else
    the textbook's, is the record's ``predicted_s``)."""
    from tqdm import tqdm

    for world in worlds:
        check_world(twin, world)
    calibration = Calibration.of(calibration)
    records: list[Record] = []
    bar = tqdm(total=len(worlds) * len(sizes), desc=f"compare {twin.name}", unit="point",
               file=sys.stderr, disable=None if progress else True, leave=False)
    try:
        for world in worlds:
            measured = run_real(twin, world, sizes, repeats, backend, network=network,
                                bandwidth=bandwidth)
            calls = [row.get("calls", 1) for row in measured]
            tiers = {model: predict(twin, world, sizes, "local", calibration, backend, network,
                                    bandwidth, calls=calls, model=model) for model in models}
            for i, meas in enumerate(measured):
                records.append(_record(twin, world, {m: rows[i] for m, rows in tiers.items()},
                                       meas))
                bar.update(1)
    finally:
        bar.close()
    return records


def compare_sustained(names: Sequence[str], worlds: Sequence[int], sizes: Sequence[int],
                      repeats: int = 15, calibration: str | Path | None = None,
                      backend: str = "gloo", timeout: float = 60.0,
                      chain_calibration: str | Path | None = None) -> list[Record]:
    """Predict and measure every twin × size, one launch per world size, all points
    interleaved (:func:`measure_sustained`); the records in ``names`` × ``worlds`` order.
    Each point is predicted as it was measured: as many calls back to back as the
    measurement ran, time per call.

    ``chain_calibration``: a calibration file to which each world's entry is copied with its
    chain of dependent exchanges re-measured in the same rounds as the algorithms (the
    ``chain`` of :func:`measure_sustained`) — the chain posted a step ahead, which the
    predictions use, where the entry has one — and so are its concurrent exchanges up to the
    largest of ``sizes`` (the bus the collectives' model prices by load,
    :mod:`simulator.host.bus`), and the ring's shift and the partners' swap posted ahead,
    which it is solved from, and the ping-pong and the stream one way of those sizes (a lone
    message, :mod:`simulator.host.pingpong`), and the shift whose messages are reduced as they
    arrive (the reductions, :mod:`simulator.host.reduction`), and the receive-ready notice,
    where the entry has them; the predictions then
    use that entry.
    ``None``: the predictions use ``calibration`` as it is."""
    from dataclasses import replace

    from backends.launch import spawn
    from simulator.core.calibration import save_entry

    twins = [get_twin(name) for name in names]
    by_point: dict[tuple[str, int, int], Record] = {}
    for world in worlds:
        for twin in twins:
            check_world(twin, world)
        points = [(twin.name, nbytes) for twin in twins for nbytes in sizes]
        chain = chain_calibration is not None
        entry = find_entry(world, backend, path=calibration) if chain else None
        ahead = entry is not None and bool(entry.chain_ahead_latency_s)
        swaps = ([n for n in entry.exchange_sizes if n <= max(sizes)]
                 if entry is not None and world > 1 else [])
        shifts_ahead = entry is not None and bool(entry.shift_ahead_times_s)
        swaps_ahead = entry is not None and bool(entry.swap_ahead_times_s)
        streams = entry is not None and bool(entry.stream_times_s)
        reduces = entry is not None and bool(entry.reduce_ahead_times_s)
        notice = entry is not None and entry.ready_notice_s is not None and world > 1
        measured = spawn(measure_sustained, world, points, repeats, SUSTAINED_REPEAT_S, chain,
                         ahead, swaps, shifts_ahead, swaps_ahead, streams, reduces, notice,
                         backend=backend, timeout=timeout)[0]
        cal = calibration
        if entry is not None:  # re-timed the chain and the bus: predict from that entry
            extra = measured[len(points):]
            chain_s = [row["median_s"] for row in extra if "chain_k" in row]
            sizes_ex = entry.exchange_sizes
            entry = replace(
                entry,
                exchange_times_s=_retimed(extra, "exchange_bytes", sizes_ex,
                                          entry.exchange_times_s),
                shift_ahead_times_s=_retimed(extra, "shift_ahead_bytes", sizes_ex,
                                             entry.shift_ahead_times_s),
                swap_ahead_times_s=_retimed(extra, "swap_ahead_bytes", sizes_ex,
                                            entry.swap_ahead_times_s),
                reduce_ahead_times_s=_retimed(extra, "reduce_ahead_bytes", sizes_ex,
                                              entry.reduce_ahead_times_s),
                p2p_times_s=_retimed(extra, "p2p_bytes", entry.p2p_sizes, entry.p2p_times_s),
                send_return_times_s=_retimed(extra, "p2p_bytes", entry.p2p_sizes,
                                             entry.send_return_times_s, "send_return_s"),
                stream_times_s=_retimed(extra, "stream_bytes", sizes_ex, entry.stream_times_s),
                ready_notice_s=next((row["ready_notice_s"] for row in extra
                                     if "ready_notice_s" in row), entry.ready_notice_s))
            save_entry(replace(entry, chain_ahead_latency_s=chain_s) if ahead
                       else replace(entry, chain_latency_s=chain_s), chain_calibration)
            cal = chain_calibration
        for twin in twins:
            rows = [measured[points.index((twin.name, nbytes))] for nbytes in sizes]
            predicted = predict(twin, world, sizes, "local", cal, backend,
                                calls=[row["calls"] for row in rows])
            for pred, meas in zip(predicted, rows, strict=True):
                by_point[(twin.name, world, pred["bytes"])] = _record(
                    twin, world, {"host": pred}, meas)
    return [by_point[(t.name, w, n)] for t in twins for w in worlds for n in sizes]


def _retimed(rows: Sequence[dict[str, Any]], key: str, sizes: Sequence[int],
             times_s: Sequence[float], column: str = "median_s") -> list[float]:
    """``times_s`` (one per size of ``sizes``) with each size re-timed in ``rows`` (the rows
    ``{key: n, column: …}`` of :func:`measure_sustained`) replaced by its new value;
    empty if ``times_s`` is (never measured)."""
    if not times_s:
        return []
    new = {row[key]: row[column] for row in rows if key in row and column in row}
    return [new.get(n, t) for n, t in zip(sizes, times_s, strict=True)]


def _record(twin: Twin, world: int, tiers: dict[str, dict[str, Any]],
            meas: dict[str, Any]) -> Record:
    """One point: prediction (``tiers``: :func:`predict`'s row by model), measurement,
    error, and nccl-tests' columns."""
    from lab.nccl_tests import algbw_GBps, busbw_GBps

    model = shown_tier(tiers)
    pred = tiers[model]
    nbytes, median = pred["bytes"], meas["median_s"]
    both: dict[str, Any] = {"model": model}
    if len(tiers) > 1:
        both = {"model": "both"}
        for m, row in tiers.items():
            both[f"predicted_{m}_s"] = row["predicted_s"]
            both[f"rel_error_{m}"] = (row["predicted_s"] - median) / median
    op = twin.operation or twin.name
    builtin = meas.get("builtin_median_s")
    return Record(
        twin=twin.name, world=world, bytes=nbytes, predicted_s=pred["predicted_s"],
        measured_median_s=median, measured_p10_s=meas["p10_s"], measured_p90_s=meas["p90_s"],
        rel_error=(pred["predicted_s"] - median) / median, closed_form_s=pred["closed_form_s"],
        count=nbytes // twin.itemsize, dtype=twin.dtype, redop=twin.redop,
        algbw_GBps=algbw_GBps(nbytes, median), busbw_GBps=busbw_GBps(op, world, nbytes, median),
        builtin_median_s=builtin,
        builtin_busbw_GBps=None if builtin is None else busbw_GBps(op, world, nbytes, builtin),
        calls=pred.get("calls", 1), **both)
