"""How fast the Megatron simulator runs at cluster scale (book ch. 12).

    flock -x /tmp/distml-measure.lock .venv/bin/python benchmarks/megatron_scale.py

Times, on one core:

1. one iteration of GPT-3 175B on 1024 A100 GPUs (t = 8, p = 16, d = 8, batch 1536,
   micro-batch 1: 192 micro-batches per pipeline) with the fast path
   (:func:`simulator.tensor_parallel.simulate_megatron`) — target ≤ 60 s;
2. the strategy search (:func:`simulator.megatron_plan.plan`) for the 1T model on 3072 GPUs,
   batch 3072: every (t, p, d, micro-batch), memory check, simulation of those that fit —
   target ≤ 5 minutes;
3. the fast path beside the full simulation (a SimPy process per GPU) on a 32-GPU
   configuration where they must agree: both iteration times and the wall-time ratio.

Writes ``OUT/megatron_scale-<run id>.json`` (a new file every run: ``_output.py``); asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Any

from simulator.core.hardware import Cluster, preset
from simulator.megatron_plan import plan
from simulator.tensor_parallel import (
    Grid,
    MegatronConfig,
    simulate_megatron,
    simulate_megatron_full,
)
from simulator.transformer import GPT
from simulator.transformer import preset as model_preset

from _output import add_out, write_json


def gpt3_on_1024() -> dict[str, Any]:
    """Item 1."""
    cluster = preset("a100", 1024)
    config = MegatronConfig(model_preset("gpt3-175b"), Grid(8, 16, 8), 1536, 1)
    start = time.perf_counter()
    result = simulate_megatron(cluster, config)
    wall = time.perf_counter() - start
    return {"what": "gpt3-175b, 1024 A100, t8 p16 d8, B=1536, b=1", "wall_s": wall,
            "iteration_time_s": result.iteration_time_s,
            "tflops_per_gpu": result.tflops_per_gpu, "microbatches": config.microbatches}


def search_3072() -> dict[str, Any]:
    """Item 2."""
    cluster = preset("a100", 3072)
    start = time.perf_counter()
    rows = plan(model_preset("gpt-1t"), cluster, 3072)
    wall = time.perf_counter() - start
    fitting = [r for r in rows if r.fits]
    return {"what": "plan gpt-1t on 3072 A100, B=3072", "wall_s": wall, "tried": len(rows),
            "fitting": len(fitting), "best": fitting[0].as_dict() if fitting else None}


def fast_vs_full() -> dict[str, Any]:
    """Item 3."""
    model = GPT(16, 1024, 16, 512, 8192, "gpt-small")
    cluster = Cluster.dgx(32, gpus_per_node=8)
    config = MegatronConfig(model, Grid(2, 4, 4), 64, 1)  # stages on separate nodes
    start = time.perf_counter()
    fast = simulate_megatron(cluster, config).iteration_time_s
    fast_wall = time.perf_counter() - start
    start = time.perf_counter()
    full = simulate_megatron_full(cluster, config).makespan_s
    full_wall = time.perf_counter() - start
    return {"what": "gpt-small, 32 GPUs, t2 p4 d4, B=64, b=1", "fast_s": fast, "full_s": full,
            "rel_difference": fast / full - 1, "fast_wall_s": fast_wall,
            "full_wall_s": full_wall, "speedup": full_wall / fast_wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    args = parser.parse_args()
    doc: dict[str, Any] = {"host": platform.node(), "python": platform.python_version()}
    for key, job in (("gpt3_1024", gpt3_on_1024), ("search_3072", search_3072),
                     ("fast_vs_full", fast_vs_full)):
        doc[key] = job()
        print(json.dumps(doc[key]), flush=True)
    write_json(doc, args.out, "megatron_scale")


if __name__ == "__main__":
    main()
