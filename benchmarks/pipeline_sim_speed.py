"""How fast the pipeline simulator runs many micro-batches on deep pipelines (book ch. 8–11).

    .venv/bin/python benchmarks/pipeline_sim_speed.py [--out benchmarks/results]

Times one step of :func:`simulator.pipeline.simulate.simulate_pipeline` (SimPy: a process per
rank, an event per action and message) against :func:`simulator.pipeline.schedules.timeline`
(the schedule's critical path in plain Python, exact on links that never queue) for GPipe and
1F1B with ``p`` stages and ``m`` micro-batches on DGX A100 nodes with ``none`` contention,
where the two must agree — the makespans are recorded side by side, with the ratio of the
wall times. Writes ``pipeline_sim_speed-<run id>.json`` (a new file every run: ``_output.py``);
asserts nothing about time.
"""

from __future__ import annotations

import argparse
import platform
import time
from typing import Any

from simulator.core import preset
from simulator.pipeline import simulate_pipeline, uniform_profile
from simulator.pipeline.schedules import gpipe, makespan, one_f_one_b, timeline

from _output import add_out, write_json

SIZES = [(4, 64), (4, 1024), (16, 256), (16, 4096), (64, 1024)]  # (stages, micro-batches)
ACTIVATION_BYTES = 8 * 2**20  # per layer and micro-batch


def one(schedule: str, p: int, m: int) -> dict[str, Any]:
    """Both simulators on one configuration; wall times and makespans."""
    cluster = preset("a100", p).with_contention("none")
    profile = uniform_profile(p, 1e-3, 2e-3, activation_bytes=ACTIVATION_BYTES)
    start = time.perf_counter()
    sim = simulate_pipeline(cluster, profile, [1] * p, m, schedule, trace=False)
    sim_wall = time.perf_counter() - start
    start = time.perf_counter()
    actions = (gpipe if schedule == "gpipe" else one_f_one_b)(p, m)
    p2p = [cluster.topology.path_latency_s(r, r + 1)
           + ACTIVATION_BYTES / cluster.topology.path_bandwidth_Bps(r, r + 1)
           for r in range(p - 1)]
    fast = makespan(timeline(actions, 1e-3, 2e-3, p2p))
    fast_wall = time.perf_counter() - start
    return {"schedule": schedule, "stages": p, "microbatches": m,
            "simpy_wall_s": sim_wall, "timeline_wall_s": fast_wall,
            "speedup": sim_wall / fast_wall if fast_wall else None,
            "simpy_makespan_s": sim.step_time_s, "timeline_makespan_s": fast,
            "rel_difference": abs(sim.step_time_s - fast) / fast}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    args = parser.parse_args()
    records = []
    for schedule in ("gpipe", "1f1b"):
        for p, m in SIZES:
            r = one(schedule, p, m)
            records.append(r)
            print(f"{schedule:<6} p={p:<3} m={m:<5} SimPy {r['simpy_wall_s']:7.3f} s   "
                  f"timeline {r['timeline_wall_s']:7.3f} s   ×{r['speedup']:5.1f}   "
                  f"makespans differ by {r['rel_difference']:.1e}", flush=True)
    path = write_json({"host": platform.node(), "records": records}, args.out,
                      "pipeline_sim_speed")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
