"""Does the loopback model reproduce the primitive that prices its waits? (book §2.4, chapter 1)

    .venv/bin/python benchmarks/chain_self_consistency.py [--calibration FILE] [--steps 50]
        [--out benchmarks/results]

The calibration's *chain of dependent exchanges* (:func:`lab.calibrate.chain_step`) is timed as
the mean of :data:`lab.calibrate.CHAIN_STEPS` steps run back to back among ``k`` ranks. The
collectives' loopback model (:meth:`Cluster.from_calibration` with ``exchange_bus`` and
``receiver_driven``, what ``lab.compare.predict`` uses) turns it into the latency a message pays
when ``k − 1`` others are in flight. One simulated step reproduces the measurement by
construction; this simulates the same chain as it was measured — ``--steps`` steps back to back —
and prints, per calibrated world and ``k``, the measured step, the simulated single step and the
simulated step of the sustained chain. Where the sustained chain comes out faster than measured,
the simulated ranks have drifted out of step so that fewer messages are in flight at once than on
the real host, and sustained predictions of algorithms whose steps couple all ranks (recursive
doubling at 4 ranks) come out fast with it. Reads a calibration only: no process is launched.
Writes ``chain_self_consistency.json``; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lab.calibrate import CHAIN_BYTES, CHAIN_STEPS
from simulator.collectives.exchange import sendrecv
from simulator.core.calibration import load_calibration
from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.core.hardware import Cluster


def chain(comm: SimComm, k: int) -> SimGen:
    """One step of the chain among ranks ``0 … k−1``, as :func:`lab.calibrate.chain_step`."""
    if comm.rank < k:
        yield from sendrecv(comm, (comm.rank + 1) % k, CHAIN_BYTES, (comm.rank - 1) % k,
                            CHAIN_BYTES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=Path, default=None,
                        help="calibration file (default: the lab's own)")
    parser.add_argument("--steps", type=int, default=CHAIN_STEPS)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
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
        machine = Cluster.from_calibration(entry, exchange_bus=True, receiver_driven=True)
        for k, measured in enumerate(entry.chain_latency_s, start=2):
            one = run_spmd(machine, chain, k, trace=False).makespan_s
            sustained = run_spmd(machine, chain, k, trace=False,
                                 calls=args.steps).makespan_s / args.steps
            rows.append({"world": entry.world_size, "k": k, "measured_s": measured,
                         "simulated_one_step_s": one, "simulated_sustained_s": sustained})
            print(f"world {entry.world_size} k={k}: measured {measured * 1e3:.3f} ms/step, "
                  f"simulated one step {one * 1e3:.3f}, {args.steps} back to back "
                  f"{sustained * 1e3:.3f} ({sustained / measured - 1:+.0%})", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "chain_self_consistency.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"steps": args.steps, "rows": rows}, indent=2))
    tmp.replace(path)


if __name__ == "__main__":
    main()
