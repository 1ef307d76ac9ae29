"""The collectives' sustained timing, as rank code: each operation run back to back for a fixed
time per repeat, as the collectives' accuracy sweep times both twins (:func:`measure_sustained`,
a rank function that :mod:`lab.compare` launches), with the primitives the prediction rests on
(:mod:`backends.primitives`) re-timed in the same rounds.

Times are seconds (per call), sizes bytes. Torch is imported inside the rank function, so that
the lab can name it without loading torch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from backends.collectives.twin_ranks import TwinLookup
from simulator.core.calibration import SUSTAINED_REPEAT_S

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


def measure_sustained(lookup: TwinLookup, points: Sequence[tuple[str, int]], repeats: int,
                      repeat_s: float = SUSTAINED_REPEAT_S, chain: bool = False,
                      ahead: bool = False, exchange_sizes: Sequence[int] = (),
                      shifts_ahead: bool = False,
                      swaps_ahead: bool = False, streams: bool = False,
                      reduces_ahead: bool = False, notice: bool = False
                      ) -> list[dict[str, Any]]:
    """Rank function: each ``(twin name, nbytes)`` point timed as nccl-tests times it
    (``lookup``: finds a twin by name, the registry's ``get_twin``).

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

    twins = {name: lookup(name) for name, _ in points}
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
