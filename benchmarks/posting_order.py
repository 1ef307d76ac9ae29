"""Does the order of ``isend`` and ``irecv`` matter? A pairwise exchange both ways (book §2.2).

    .venv/bin/python benchmarks/posting_order.py [--worlds 2 4] [--repeats 15]
        [--out benchmarks/results]

Every rank swaps a float32 buffer with rank ``r XOR 1`` — the step of recursive doubling at
distance 1, and the calibration's concurrent-exchange primitive — posted in two orders, their
repeats interleaved in one launch per world (:func:`backends.measure.measure_many`: each repeat
runs the exchange back to back for ~20 ms and takes the time per call, the slowest rank's):

* ``send_first`` — ``isend``, then a blocking ``recv``, then wait for the send (how the
  calibration's concurrent exchange was posted until the lab's ranks ran under
  ``SCHED_BATCH``);
* ``recv_first`` — ``irecv``, then ``isend``, then wait for both: the step the lab's
  collectives post (:meth:`backends.collectives.comm.Comm.sendrecv`, called here), and the
  calibration's exchange now (:func:`backends.primitives.pair_exchange`).

Gloo moves a send's bytes only once the receiver's "receive ready" notice has arrived
(``gloo/transport/tcp/pair.cc``). A send posted before that notice is queued and gloo's I/O
thread writes it when the notice comes; a send posted after it is written at once by the
calling thread, under the pair's lock, which the I/O thread also needs to read what the partner
sends (it only tries the lock and, failing, leaves the event for epoll to report again).
Posting the receive first makes the second case likely, posting the send first the first.
Under the kernel's default scheduling policy that second case is where the tick stall lives
(``benchmarks/tick_stalls.py``): run with ``DISTML_RANK_SCHED=normal`` to see the two orders
apart, and with the lab's default (``batch``) to see them agree. Writes
``posting_order-<run id>.json``/``.csv`` (new files every run: ``_output.py``) (median, p10, p90
per order and the ratio recv_first / send_first of the medians) and prints a table; asserts
nothing.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

import torch

from backends.collectives.comm import Comm
from backends.launch import spawn
from backends.measure import Timing, measure_many
from simulator.core.calibration import SUSTAINED_REPEAT_S

from _output import add_out, write_records

SIZES = [2**k for k in range(16, 25, 2)]
"""Buffer sizes, bytes: 64 KiB … 16 MiB, those of the collectives' accuracy sweep."""
ORDERS = ("send_first", "recv_first")


def send_first(send: torch.Tensor, recv: torch.Tensor) -> None:
    """Send to the partner (``r xor 1``), receive from it blocking, then wait for the send."""
    import torch.distributed as dist

    peer = dist.get_rank() ^ 1
    if peer < dist.get_world_size():
        request = dist.isend(send, peer)
        dist.recv(recv, peer)
        request.wait()


def time_orders(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Rank function: the timings of both orders for every size (ranks without a partner, the
    last one of an odd world, only join the barriers)."""
    comm = Comm()
    peer = comm.rank ^ 1
    has_peer = peer < comm.world_size
    fns: list[Callable[[], None]] = []
    for nbytes in sizes:
        send, recv = torch.zeros(nbytes // 4), torch.empty(nbytes // 4)
        fns.append(functools.partial(send_first, send, recv))  # idle without a partner
        fns.append(functools.partial(comm.sendrecv, peer, send, peer, recv) if has_peer
                   else lambda: None)
    timings = measure_many(fns, repeats=repeats, warmup=3, repeat_s=SUSTAINED_REPEAT_S)
    return [{"bytes": nbytes, "send_first": timings[2 * i], "recv_first": timings[2 * i + 1]}
            for i, nbytes in enumerate(sizes)]


def as_record(world: int, row: dict[str, Any]) -> dict[str, Any]:
    """One CSV/JSON record: median/p10/p90 per order, s, and the ratio of the medians."""
    record: dict[str, Any] = {"world": world, "bytes": row["bytes"]}
    for order in ORDERS:
        t: Timing = row[order]
        record |= {f"{order}_median_s": t.median_s, f"{order}_p10_s": t.p10_s,
                   f"{order}_p90_s": t.p90_s}
    record["ratio_recv_first_over_send_first"] = (row["recv_first"].median_s
                                                  / row["send_first"].median_s)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=15)
    add_out(parser)
    args = parser.parse_args()
    if any(w < 2 for w in args.worlds) or args.repeats < 1:
        parser.error("worlds must be at least 2 and --repeats at least 1")
    records = []
    print(f"{'world':>5} {'size(B)':>10} {'send_first(ms)':>15} {'recv_first(ms)':>15} "
          f"{'ratio':>6}")
    for world in args.worlds:
        for row in spawn(time_orders, world, SIZES, args.repeats, timeout=300)[0]:
            r = as_record(world, row)
            records.append(r)
            print(f"{world:>5} {r['bytes']:>10} {r['send_first_median_s'] * 1e3:>15.3f} "
                  f"{r['recv_first_median_s'] * 1e3:>15.3f} "
                  f"{r['ratio_recv_first_over_send_first']:>6.2f}", flush=True)
    print(f"wrote {write_records(records, args.out, 'posting_order')}", file=sys.stderr)


if __name__ == "__main__":
    main()
