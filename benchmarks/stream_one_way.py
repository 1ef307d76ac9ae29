"""A stream one way beside the ping-pong, and the broadcast between two ranks (book §2.2–2.3).

    .venv/bin/python benchmarks/stream_one_way.py [--repeats 15] [--out benchmarks/results]

Two ranks, one launch, every way and size interleaved in the same rounds
(:func:`backends.measure.measure_many`), each repeat running its operation back to back for
:data:`~simulator.core.calibration.SUSTAINED_REPEAT_S` as the accuracy sweep does; 64 KiB …
16 MiB:

* ``ping_pong`` — :func:`backends.collectives.point_to_point.ping_pong`, half the round trip;
  rank 0 also times how long each of its blocking sends took to *return*
  (``send_return``): once the socket buffers hold what rank 1 has not read;
* ``stream`` — :func:`~backends.collectives.point_to_point.stream`, rank 0 → rank 1, time per
  message: each send is posted before rank 1 has posted its next receive (queued);
* ``stream_ahead`` — the same messages with rank 1's next receive posted one message ahead
  (two buffers in turn), so that each send finds its receive-ready notice;
* ``broadcast`` — :func:`backends.collectives.broadcast.binomial_broadcast` from rank 0: between
  two ranks the same messages as the stream, through the algorithm's code.

The calibration times the first two (``p2p_times_s``, ``send_return_times_s``,
``stream_times_s``) and the collectives' model prices a lone message from them
(:mod:`simulator.host.pingpong`; benchmarks/NOTES.md, "A stream one way"). Writes
``stream_one_way-<run id>.json``/``.csv`` (new files every run: ``_output.py``) (median, p10, p90
per way and size, and the ratios to the ping-pong's one-way time) and prints a table; asserts
nothing — run it twice.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from backends.launch import spawn
from backends.measure import Timing

from _output import benchmark_args, write_records

SIZES = [2**k for k in range(16, 25, 2)]
"""Message sizes, bytes: 64 KiB … 16 MiB, those of the collectives' accuracy sweep."""
WAYS = ("ping_pong", "stream", "stream_ahead", "broadcast")


def stream_ahead(rank: int, slots: torch.Tensor, messages: int) -> None:
    """``messages`` messages 0 → 1, rank 1's receive of the next one posted before it waits for
    the current one (into the other row of ``slots``)."""
    from backends.collectives.comm import post_recv, post_send

    if rank == 0:
        for k in range(messages):
            post_send(slots[k % 2], 1).wait()
    elif rank == 1:
        ahead = post_recv(slots[0], 0)
        for k in range(messages):
            current = ahead
            if k + 1 < messages:
                ahead = post_recv(slots[(k + 1) % 2], 0)
            current.wait()


def one_way(sizes: list[int], repeats: int, ahead_messages: int = 8) -> list[dict[str, Any]]:
    """Rank function (two ranks): every way at every size; rank 0 returns the rows."""
    import torch.distributed as dist

    from backends.collectives.broadcast import binomial_broadcast
    from backends.collectives.point_to_point import ping_pong, stream
    from backends.measure import measure_many
    from simulator.core.calibration import SUSTAINED_REPEAT_S

    rank = dist.get_rank()
    steps: list[Any] = []
    returns: dict[int, list[float]] = {n: [] for n in sizes}
    for n in sizes:
        buf = torch.zeros(n, dtype=torch.uint8)
        steps += [functools.partial(ping_pong, buf, returns=returns[n]),
                  functools.partial(stream, buf),
                  functools.partial(stream_ahead, rank, torch.zeros(2, n, dtype=torch.uint8),
                                    ahead_messages),
                  functools.partial(binomial_broadcast, torch.zeros(n // 4), 0)]
    timings = iter(measure_many(steps, repeats=repeats, repeat_s=SUSTAINED_REPEAT_S))
    per_message = {"ping_pong": 2, "stream": 1, "stream_ahead": ahead_messages, "broadcast": 1}
    rows = []
    for n in sizes:
        row: dict[str, Any] = {"bytes": n}
        for way in WAYS:
            t = next(timings)
            k = per_message[way]
            row[way] = Timing(t.median_s / k, t.p10_s / k, t.p90_s / k, ())
        row["send_return"] = Timing.from_samples(returns[n] or [0.0])
        rows.append(row)
    return rows


def as_record(row: dict[str, Any]) -> dict[str, Any]:
    """One CSV/JSON record: median/p10/p90 of each way, s, and the ratios to the ping-pong."""
    record: dict[str, Any] = {"bytes": row["bytes"]}
    ways = (*WAYS, "send_return")
    for way in ways:
        record |= row[way].columns(way)
    pp = row["ping_pong"].median_s
    return record | {f"{way}_over_ping_pong": row[way].median_s / pp for way in ways[1:]}


def main() -> None:
    args = benchmark_args(__doc__)
    rows = spawn(one_way, 2, SIZES, args.repeats, timeout=300)[0]
    records = [as_record(row) for row in rows]
    print(f"{'size(B)':>10} {'ping-pong(us)':>14} {'stream':>8} {'ahead':>8} {'bcast':>8} "
          f"{'send returns':>13}   (ratios to the ping-pong's one-way time)")
    for r in records:
        print(f"{r['bytes']:>10} {r['ping_pong_median_s'] * 1e6:>14.0f} "
              f"{r['stream_over_ping_pong']:>8.2f} {r['stream_ahead_over_ping_pong']:>8.2f} "
              f"{r['broadcast_over_ping_pong']:>8.2f} {r['send_return_over_ping_pong']:>13.2f}")
    write_records(records, args.out, "stream_one_way")


if __name__ == "__main__":
    main()
