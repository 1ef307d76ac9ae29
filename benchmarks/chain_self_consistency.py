"""Does the loopback model reproduce the primitive that prices its waits? (book §2.4, chapter 1)

    .venv/bin/python benchmarks/chain_self_consistency.py [--calibration FILE] [--steps 50]
        [--out benchmarks/results]

The calibration's *chain of dependent exchanges* is timed as the mean of
:data:`simulator.core.calibration.CHAIN_STEPS` steps run back to back among ``k`` ranks, posted
two ways: plainly (:func:`backends.primitives.chain_step`) and a step ahead, as the collectives
post their steps (:func:`backends.primitives.chain_ahead`). The loopback model with every host
effect (:func:`~simulator.host.cluster_from_entry` with ``exchange_bus`` and ``receiver_driven``;
the host tier leaves the chain out, ``benchmarks/README.md``) prices the latency of a message that
starts while ``k − 1`` others are in flight by the chain posted ahead, scaled so that the
simulated chain takes the measured time per step (:func:`simulator.host.wakeup.chain_means`). This
simulates, per calibrated world and ``k``, the same chain as it was measured — ``--steps`` steps
back to back — and prints the measured step, the simulated one in the collectives' model, and the
simulated one where messages that start together are counted in the order the simulation starts
them (what the model did before, and the other chapters' loopback model still does): there the
ranks whose messages came first run ahead step after step, fewer messages are in flight than on
the real host, and a sustained chain among four came out at under half the measured step. Reads a
calibration only: no process is launched. Writes ``chain_self_consistency-<run id>.json`` (a new
file every run: ``_output.py``); asserts nothing.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from simulator.core.calibration import CHAIN_STEPS, load_calibration
from simulator.host import cluster_from_entry
from simulator.host.wakeup import chain_step_s

from _output import add_out, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=Path, default=None,
                        help="calibration file (default: the lab's own)")
    parser.add_argument("--steps", type=int, default=CHAIN_STEPS)
    add_out(parser)
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    entries = [e for e in load_calibration(args.calibration).values()
               if e.network == "loopback" and e.chain_latency_s]
    if not entries:
        parser.error("no loopback calibration with a chain measurement: run "
                     "'distml-lab calibrate --world 4' first")
    rows: list[dict[str, Any]] = []
    for entry in sorted(entries, key=lambda e: e.world_size):
        machine = cluster_from_entry(entry, exchange_bus=True, receiver_driven=True)
        ahead = bool(entry.chain_ahead_latency_s)
        in_order = cluster_from_entry(replace(entry, chain_ahead_latency_s=[]),
                                      exchange_bus=True).with_host(
            receiver_driven_sends=True, post_overhead_s=entry.post_overhead_s or 0.0)
        measured_chain = entry.chain_ahead_latency_s if ahead else entry.chain_latency_s
        for k, measured in enumerate(measured_chain, start=2):
            model = chain_step_s(machine, k, ahead, args.steps)
            ordered = chain_step_s(in_order, k, False, args.steps)
            rows.append({"world": entry.world_size, "k": k, "posted_ahead": ahead,
                         "measured_s": measured, "simulated_s": model,
                         "simulated_counted_in_order_s": ordered,
                         "measured_plain_s": entry.chain_latency_s[k - 2]})
            print(f"world {entry.world_size} k={k}: measured {measured * 1e3:.3f} ms/step"
                  f"{' (posted ahead)' if ahead else ''}, simulated {model * 1e3:.3f} "
                  f"({model / measured - 1:+.0%}); counted in order, plain chain "
                  f"{ordered * 1e3:.3f} against {entry.chain_latency_s[k - 2] * 1e3:.3f} "
                  f"({ordered / entry.chain_latency_s[k - 2] - 1:+.0%})", flush=True)
    write_json({"steps": args.steps, "rows": rows}, args.out, "chain_self_consistency")


if __name__ == "__main__":
    main()
