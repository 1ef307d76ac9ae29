"""One message one way, three ways of posting it: who writes its bytes (book §2.2).

    .venv/bin/python benchmarks/who_writes.py [--repeats 15] [--out benchmarks/results]

Two ranks; rank 0 sends a float32 buffer of 64 KiB … 16 MiB to rank 1, which receives it.
Gloo moves a send's bytes only once the receiver's "receive ready" notice has arrived
(``gloo/transport/tcp/pair.cc``); what happens next depends on when that was:

* ``early`` — rank 1 posts its receive, rank 0 posts its send 2 ms later: the notice is
  there, and the *calling* thread writes the bytes. Timed on the sender, from posting the send
  to its completion — which comes once the socket buffers hold what rank 1 has not yet read,
  at about 55–75 % of the one-way time on the lab's host (the calibration's
  ``send_return_times_s``), so ``early`` and ``late`` time different ends of a message.
* ``late`` — rank 0 posts its send, rank 1 posts its receive 2 ms later: the send waits in
  gloo's queue, and its *I/O thread* writes the bytes once the notice comes. Timed on the
  receiver, from posting the receive to its completion (so the notice's trip is included, a few
  tens of microseconds).
* ``stream`` — back to back, as a broadcast between two ranks runs call after call: each send
  is posted as soon as the last one completed, each receive as soon as the last one arrived,
  so a send usually finds no notice yet. Time per message.

The α-β model has one time for all three; the simulator prices a message by the link or the
calibrated bus and lets a send that finds no notice wait for it, but writes its bytes at the
same rate. Writes ``who_writes-<run id>.json``/``.csv`` (new files every run: ``_output.py``)
(median, p10, p90 per way and size, and the ratios late/early and stream/early of the medians)
and prints a table; asserts nothing — timing on a shared machine is noisy: run it twice.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from backends.collectives.comm import post_recv, post_send
from backends.launch import spawn
from backends.measure import Timing

from _output import benchmark_args, write_records

SIZES = [2**k for k in range(16, 25, 2)]
"""Message sizes, bytes: 64 KiB … 16 MiB, those of the collectives' accuracy sweep."""
WAYS = ("early", "late", "stream")
HEAD_START_S = 0.002
"""How long the first side waits for the other to have posted, s."""
STREAM = 8
"""Messages a stream sample sends back to back."""


def _post(rank: int, buf: torch.Tensor) -> Any:
    """This rank's side of one message 0 → 1: rank 0 posts the send, rank 1 the receive."""
    return post_send(buf, 1) if rank == 0 else post_recv(buf, 0)


def _posted_second(rank: int, second: int, buf: torch.Tensor) -> float | None:
    """One message 0 → 1, rank ``second`` posting its side ``HEAD_START_S`` after the other:
    on that rank the time from posting to completion, s (``None`` on the other)."""
    import torch.distributed as dist

    dist.barrier()
    if rank != second:
        _post(rank, buf).wait()
        return None
    time.sleep(HEAD_START_S)
    start = time.perf_counter()
    _post(rank, buf).wait()
    return time.perf_counter() - start


def one_way(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Rank function (two ranks): every way at every size, repeats interleaved; rank 1 returns
    the timings (early: as rank 0 saw them, sent to rank 1), rank 0 nothing."""
    import torch.distributed as dist

    rank = dist.get_rank()
    rows = []
    for nbytes in sizes:
        buf = torch.zeros(nbytes // 4)
        samples: dict[str, list[float]] = {way: [] for way in WAYS}
        for _ in range(repeats):
            for way, second in (("early", 0), ("late", 1)):  # who posts 2 ms after the other
                if (took := _posted_second(rank, second, buf)) is not None:
                    samples[way].append(took)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(STREAM):
                _post(rank, buf).wait()
            samples["stream"].append((time.perf_counter() - start) / STREAM)
        early = (torch.tensor(samples["early"], dtype=torch.float64) if rank == 0
                 else torch.zeros(repeats, dtype=torch.float64))
        dist.broadcast(early, 0)  # the sender's times, for rank 1 to report
        samples["early"] = early.tolist()
        if rank == 1:
            rows.append({"bytes": nbytes}
                        | {way: Timing.from_samples(samples[way]) for way in WAYS})
    return rows


def as_record(row: dict[str, Any]) -> dict[str, Any]:
    """One CSV/JSON record: median/p10/p90 of each way, s, and the ratios to ``early``."""
    record: dict[str, Any] = {"bytes": row["bytes"]}
    for way in WAYS:
        record |= row[way].columns(way)
    for way in ("late", "stream"):
        record[f"{way}_over_early"] = row[way].median_s / row["early"].median_s
    return record


def main() -> None:
    args = benchmark_args(__doc__)
    rows = spawn(one_way, 2, SIZES, args.repeats, timeout=120)[1]
    records = [as_record(row) for row in rows]
    print(f"{'size(B)':>10} {'early(us)':>10} {'late(us)':>10} {'stream(us)':>10} "
          f"{'late/early':>10} {'stream/early':>12}")
    for r in records:
        print(f"{r['bytes']:>10} {r['early_median_s'] * 1e6:>10.0f} "
              f"{r['late_median_s'] * 1e6:>10.0f} {r['stream_median_s'] * 1e6:>10.0f} "
              f"{r['late_over_early']:>10.2f} {r['stream_over_early']:>12.2f}")
    write_records(records, args.out, "who_writes")


if __name__ == "__main__":
    main()
