"""Prediction beside measurement: run both twins over a sweep and tabulate the error.

For each (world size, message size) point:

* **predicted_s** — the simulated twin on the calibrated local cluster
  (:func:`~simulator.host.local_host_cluster`), whose parameters were measured on primitives only;
* **closed_form_s** — the textbook formula with the same α and β, where one exists;
* **measured_median_s / p10 / p90** — the real twin on real processes
  (:func:`backends.measure.measure`), barrier-aligned repeats;
* **rel_error** — (predicted − measured median) / measured median.

The prediction is :mod:`lab.predict`'s, the records and their files :mod:`lab.records`'; this
module runs the real twins, pairs each measurement with its prediction, and calibrates on
first use.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lab.predict import check_world, predict
from lab.records import Record
from lab.twins import Twin, get_twin
from simulator.core.calibration import SUSTAINED_REPEAT_S, CalibrationError, find_entry
from simulator.core.engine import Trace

# ---- the real side ------------------------------------------------------------------------

def measure_twin(name: str, sizes: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    """Rank function: check the real twin against PyTorch once, then time each size — and,
    for a collective, PyTorch's built-in side by side, interleaved in the same rounds. Each
    repeat runs its operation back to back for about :data:`SUSTAINED_REPEAT_S`, as the
    calibration times the primitives the prediction is built from; a row's ``calls`` is how
    many calls that was (its times are per call)."""
    from backends.measure import measure_many

    twin = get_twin(name)
    twin.check(min(sizes, default=0))
    steps = [twin.real_step(nbytes, None) for nbytes in sizes]
    if twin.builtin_step is not None:
        steps += [twin.builtin_step(nbytes) for nbytes in sizes]
    timings = [t.as_dict() for t in measure_many(steps, repeats=repeats,
                                                 repeat_s=SUSTAINED_REPEAT_S)]
    ours, builtin = timings[:len(sizes)], timings[len(sizes):]
    for row, other in zip(ours, builtin, strict=False):
        row["builtin_median_s"] = other["median_s"]
    return ours


CALLS_PROBES = 5
"""Single calls timed to choose how many calls a sustained repeat runs."""
MAX_CALLS = 1000
"""The most calls one sustained repeat runs back to back."""


def sustained_calls(repeat_s: float, probes_s: Sequence[float]) -> int:
    """How many calls back to back make a repeat of about ``repeat_s`` seconds, from single
    calls timed beforehand (s): sized by the *fastest* probe. On a host whose woken ranks
    sometimes wait a 4 ms scheduler tick, one probe that waited makes a median of a few
    probes several times the call's time, the repeat then holds only a handful of calls, and
    its time per call is again the lottery of a single call that the sustained measurement
    is there to average out."""
    fastest = min(probes_s)
    if not fastest > 0:
        return MAX_CALLS
    return max(1, min(MAX_CALLS, math.ceil(repeat_s / fastest)))


def measure_sustained(points: Sequence[tuple[str, int]], repeats: int,
                      repeat_s: float = SUSTAINED_REPEAT_S, chain: bool = False,
                      ahead: bool = False, exchange_sizes: Sequence[int] = (),
                      shifts_ahead: bool = False,
                      swaps_ahead: bool = False, streams: bool = False,
                      reduces_ahead: bool = False, notice: bool = False
                      ) -> list[dict[str, Any]]:
    """Rank function: each ``(twin name, nbytes)`` point timed as nccl-tests times it.

    A repeat runs the operation back to back for about ``repeat_s`` seconds (at least once;
    :func:`sustained_calls`) and takes the time per call; the point's statistic is the median
    over ``repeats`` such repeats. Every point's repeats are interleaved in the same rounds
    (:func:`backends.measure.measure_many`), so a slow spell of the machine hits all points
    alike. On a host with more runnable threads than cores, under the kernel's default
    scheduling policy, a single call is a lottery — gloo may stall a whole scheduler tick (4 ms
    here; chapter 2, "The four-millisecond stall") or not at all — and its median
    swings with how often that happens; the time per call over many calls takes the waits in
    as often as they occur, which is what the simulator's calibrated step latency
    (:mod:`lab.calibrate`'s chain of dependent exchanges, timed the same way) predicts.

    ``chain``: also time one step of the chain of dependent exchanges among ``k = 2 … p``
    ranks (:func:`backends.primitives.chain_step`), the same way and in the same rounds, once after
    each twin's points (so spread over the round); its rows follow the points'
    (``{"chain_k": k, "median_s": …}``, statistics over the samples of all its copies). How
    often a woken rank waits a tick comes and goes in spells of a fraction of a second to
    minutes on this host: a primitive measured in the same rounds sees the same spells as
    the algorithms. ``ahead``: the chain is the one posted a step ahead, as the collectives
    post theirs (:func:`backends.primitives.chain_ahead`, a whole chain per call; its rows still
    give one step).

    ``exchange_sizes``: also time the calibration's concurrent exchange of each size
    (:func:`backends.primitives.pair_exchange`, bytes per message) the same way, beside the chain;
    its rows follow the chain's (``{"exchange_bytes": n, "median_s": …}``). The host's copy
    rate drifts too (the same 8 MiB exchange by a tenth or more between one minute and the
    next): the bus the predictions use is then the one of these rounds. ``shifts_ahead``:
    the ring's shift of the same sizes posted ahead is timed too
    (:func:`backends.primitives.shift_ahead`, a few steps per call), after them
    (``{"shift_ahead_bytes": n, "median_s": …}``, one step); ``swaps_ahead``: and so is the
    swap between partners posted ahead (:func:`backends.primitives.swap_ahead`,
    ``{"swap_ahead_bytes": n, …}``). ``streams``: and so are the lone message's primitives,
    the ping-pong and the stream one way of the same sizes
    (``{"p2p_bytes": n, "send_return_s": …, …}``, one way and rank 0's send returns;
    ``{"stream_bytes": n, …}``, one message). ``reduces_ahead``: and so is the shift whose
    received messages are reduced as they arrive (:func:`backends.primitives.reduce_ahead`,
    ``{"reduce_ahead_bytes": n, …}``, one step), which prices the reductions. ``notice``:
    and so is the receive-ready notice (:func:`backends.primitives.ready_notice_step`, its samples
    taken as the calibration takes them; a row ``{"ready_notice_s": …}``): measured once,
    minutes earlier, in a slow spell of the host it once came out at 418 µs where it is
    usually a few, and priced every phase's first send of every prediction at that.
    """
    import functools

    import torch
    import torch.distributed as dist

    from backends.collectives.point_to_point import ping_pong, stream
    from backends.measure import measure, measure_many
    from backends.primitives import (
        chain_ahead,
        chain_step,
        pair_exchange,
        ready_notice_step,
        reduce_ahead,
        shift_ahead,
        swap_ahead,
    )
    from simulator.core.calibration import CHAIN_BYTES, CHAIN_STEPS, SHIFT_AHEAD_STEPS

    twins = {name: get_twin(name) for name, _ in points}
    for twin in twins.values():
        twin.check(min(n for name, n in points if name == twin.name))
    chains = list(range(2, dist.get_world_size() + 1)) if chain else []
    token, slot = (torch.zeros(CHAIN_BYTES, dtype=torch.uint8),
                   torch.empty(CHAIN_BYTES, dtype=torch.uint8))
    slots = torch.empty(2, CHAIN_BYTES, dtype=torch.uint8)
    # (row key, bytes, the primitive, steps per call): the exchanges, then those posted ahead
    swaps: list[tuple[str, int, Callable[[], None], int]] = [
        ("exchange_bytes", n, functools.partial(pair_exchange, torch.zeros(n, dtype=torch.uint8),
                                                torch.empty(n, dtype=torch.uint8)), 1)
        for n in exchange_sizes]
    kinds = [("shift_ahead_bytes", shift_ahead)] if shifts_ahead else []
    kinds += [("swap_ahead_bytes", swap_ahead)] if swaps_ahead else []
    swaps += [(key, n, functools.partial(kind, torch.zeros(n, dtype=torch.uint8),
                                         torch.empty(2, n, dtype=torch.uint8)),
               SHIFT_AHEAD_STEPS) for key, kind in kinds for n in exchange_sizes]
    swaps += [("reduce_ahead_bytes", n, functools.partial(
        reduce_ahead, torch.ones(n // 4), torch.empty(2, n // 4), torch.zeros(n // 4)),
        SHIFT_AHEAD_STEPS) for n in (exchange_sizes if reduces_ahead else ())]
    early: list[float] = []
    late: list[float] = []
    stamps = torch.zeros(2, dtype=torch.float64)
    swaps += [("ready_notice_s", 0, functools.partial(ready_notice_step, slot, stamps, early,
                                                      late), 1)] if notice else []
    returns: dict[int, list[float]] = {n: [] for n in exchange_sizes} if streams else {}
    swaps += [("p2p_bytes", n, functools.partial(ping_pong, torch.zeros(n, dtype=torch.uint8),
                                                 returns=returns[n]), 2) for n in returns]
    swaps += [("stream_bytes", n, functools.partial(stream, torch.zeros(n, dtype=torch.uint8)),
               1) for n in returns]
    steps: list[Callable[[], None]] = []
    where: list[int] = []  # what each step is: a point's index, -k for the chain among k,
    # or len(points) + j for the j-th exchange
    for i, (name, nbytes) in enumerate(points):
        steps.append(twins[name].real_step(nbytes, None))
        where.append(i)
        if (chains or swaps) and (i + 1 == len(points) or points[i + 1][0] != name):
            steps += [functools.partial(chain_ahead, k, token, slots) if ahead
                      else functools.partial(chain_step, k, token, slot) for k in chains]
            where += [-k for k in chains]
            steps += [fn for _, _, fn, _ in swaps]
            where += [len(points) + j for j in range(len(swaps))]
    calls = [sustained_calls(repeat_s, measure(step, repeats=CALLS_PROBES, inner=1).samples_s)
             for step in steps]

    def looped(step: Callable[[], None], k: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(k):
                step()
        return run

    timings = measure_many([looped(s, k) for s, k in zip(steps, calls, strict=True)],
                           repeats=repeats, inner=1)
    per_call = [[x / k for x in t.samples_s] for t, k in zip(timings, calls, strict=True)]
    rows: list[dict[str, Any]] = [{} for _ in points]
    pooled: dict[int, list[float]] = {k: [] for k in chains}
    exchanged: list[list[float]] = [[] for _ in swaps]
    for w, samples, t, k in zip(where, per_call, timings, calls, strict=True):
        if w >= len(points):
            per = swaps[w - len(points)][3]
            exchanged[w - len(points)] += [x / per for x in samples]
        elif w >= 0:
            rows[w] = {"median_s": t.median_s / k, "p10_s": t.p10_s / k, "p90_s": t.p90_s / k,
                       "calls": k}
        else:
            pooled[-w] += [x / CHAIN_STEPS for x in samples] if ahead else samples
    for k in chains:
        rows.append({"chain_k": k, **_pooled_stats(pooled[k])})
    for (key, n, _, _), samples in zip(swaps, exchanged, strict=True):
        if key == "ready_notice_s":  # its own samples, as the calibration takes them
            if early and late:
                rows.append({key: max(0.0, statistics.median(late) - statistics.median(early))})
            continue
        rows.append({key: n, **_pooled_stats(samples)}
                    | ({"send_return_s": statistics.median(returns[n])}
                       if key == "p2p_bytes" and returns[n] else {}))
    return rows


def _pooled_stats(samples: Sequence[float]) -> dict[str, Any]:
    """Median, p10, p90 (s) and the count of samples pooled from several copies of a step."""
    q = (statistics.quantiles(samples, n=10, method="inclusive") if len(samples) > 1
         else list(samples) * 9)
    return {"median_s": statistics.median(samples), "p10_s": q[0], "p90_s": q[-1],
            "calls": len(samples)}


def trace_twin(name: str, nbytes: int) -> list[dict[str, Any]]:
    """Rank function: one warm run, then one traced run; every rank's spans."""
    import torch.distributed as dist

    from backends.trace import Tracer

    twin = get_twin(name)
    tracer = Tracer()
    step = twin.real_step(nbytes, tracer)
    step()
    dist.barrier()
    tracer.trace.spans.clear()
    step()
    return tracer.gather().to_records()


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

    records = spawn(trace_twin, world, twin.name, nbytes, backend=backend, network=network,
                    bandwidth=bandwidth)[0]
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
                      bandwidth=bandwidth, **calibration_sweep(quick))


def compare(twin: Twin, worlds: Sequence[int], sizes: Sequence[int], repeats: int = 10,
            calibration: str | Path | None = None, backend: str = "gloo",
            progress: bool = True, network: str = "loopback",
            bandwidth: str | Sequence[str | int] | None = None) -> list[Record]:
    """Predict and measure every point; one launch per world size (on ``network``). Each
    point is predicted as it was measured: as many calls back to back as a repeat ran
    (:func:`measure_twin`), time per call."""
    from tqdm import tqdm

    for world in worlds:
        check_world(twin, world)
    records: list[Record] = []
    bar = tqdm(total=len(worlds) * len(sizes), desc=f"compare {twin.name}", unit="point",
               file=sys.stderr, disable=None if progress else True, leave=False)
    try:
        for world in worlds:
            measured = run_real(twin, world, sizes, repeats, backend, network=network,
                                bandwidth=bandwidth)
            predicted = predict(twin, world, sizes, "local", calibration, backend, network,
                                bandwidth, calls=[row.get("calls", 1) for row in measured])
            for pred, meas in zip(predicted, measured, strict=True):
                records.append(_record(twin, world, pred, meas))
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
                by_point[(twin.name, world, pred["bytes"])] = _record(twin, world, pred, meas)
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


def _record(twin: Twin, world: int, pred: dict[str, Any], meas: dict[str, Any]) -> Record:
    """One point: prediction, measurement, error, and nccl-tests' columns."""
    from lab.nccl_tests import algbw_GBps, busbw_GBps

    nbytes, median = pred["bytes"], meas["median_s"]
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
        calls=pred.get("calls", 1))
