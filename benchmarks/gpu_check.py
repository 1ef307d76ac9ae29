"""The GPU check: NCCL, GEMMs and the real twins on the GPUs of one machine, in one short run.

    .venv/bin/python benchmarks/gpu_check.py [--world G] [--budget-s 420] [--out DIR]

What only a GPU can show, measured beside the simulator's prediction, step by step, each step a
child process of the lab's own command line with a time limit, the whole run within
``--budget-s`` seconds (steps that no longer fit are recorded as skipped, never started):

1. the machine: torch and CUDA versions, the GPUs' names and memory;
2. ``distml-lab calibrate --backend nccl --quick --world 2,G``: NCCL's point-to-point α and β,
   reduction and copy rates on these GPUs (the calibration every comparison below reads);
3. ``distml-lab calibrate --backend nccl --quick --cluster-out``: the cluster file —
   point-to-point and all-reduce bus bandwidth by size, GEMM FLOP/s by shape, memory
   bandwidth — and ``simulate all_reduce.ring --cluster FILE`` on it;
4. ``distml-lab compare TWIN --backend nccl --quick --world G --json`` for the collectives
   (:data:`COLLECTIVES`): predicted beside measured, relative error per size;
5. the strategy twins that run on GPUs through the device rule (:data:`STRATEGIES`: DDP, the
   pipelines, Megatron's tensor parallelism, ZeRO), whose ranks ``spawn`` puts on NCCL and
   ``cuda:LOCAL_RANK`` when GPUs are visible;
6. ``torchrun --nproc-per-node G -m lab.run ddp --quick`` and ``compare ddp --measured``: the
   multi-node entry point on NCCL.

Writes ``OUT/gpu_check-<run id>.json``: every step's command, exit status, seconds and, for the
comparisons, each record's predicted and measured time and error. Asserts nothing about time.
Without a visible GPU it stops before any work (one line, exit status 2) unless
``--allow-cpu``, which runs the same steps on gloo and the CPU (a dry run of the script itself).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _output import add_out, write_json

ROOT = Path(__file__).resolve().parents[1]
COLLECTIVES = ("ping_pong", "broadcast.binomial", "all_gather.ring", "reduce_scatter.ring",
               "all_reduce.ring", "all_reduce.double_binary_tree", "all_to_all.pairwise")
STRATEGIES = ("ddp", "pipeline.gpipe", "pipeline.1f1b", "megatron", "zero.3")
STEP_LIMIT_S = 150
"""The most one step may take, s (a hung NCCL call ends here, not at the budget)."""


def _lab(*args: str) -> list[str]:
    """The lab's command line, run from this checkout."""
    return [sys.executable, "-m", "lab.cli", *args]


class Run:
    """The steps of one check, within a budget of seconds."""

    def __init__(self, budget_s: float, tmp: Path) -> None:
        self.deadline = time.monotonic() + budget_s
        self.tmp = tmp
        self.steps: list[dict[str, Any]] = []
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "DISTML_CALIBRATION":
                    str(tmp / "calibration.json")}

    def step(self, name: str, command: list[str], limit_s: float = STEP_LIMIT_S) -> Any:
        """Run ``command``; return its stdout parsed as JSON (or ``None``)."""
        left = self.deadline - time.monotonic()
        row: dict[str, Any] = {"step": name, "command": " ".join(command[2:] if
                                                                 command[0] == sys.executable
                                                                 else command)}
        self.steps.append(row)
        if left < 20:
            row.update(status="skipped", why="out of budget")
            print(f"{name:<40} skipped (budget)", flush=True)
            return None
        start = time.monotonic()
        try:
            done = subprocess.run(command, cwd=ROOT, env=self.env, capture_output=True,
                                  text=True, timeout=min(limit_s, left))
        except subprocess.TimeoutExpired:
            row.update(status="timeout", seconds=round(time.monotonic() - start, 1))
            print(f"{name:<40} ran past {min(limit_s, left):.0f} s", flush=True)
            return None
        row.update(status="ok" if done.returncode == 0 else "failed", rc=done.returncode,
                   seconds=round(time.monotonic() - start, 1))
        if done.returncode != 0:
            row["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1][-300:]
        print(f"{name:<40} {row['status']:<7} {row['seconds']:6.1f} s "
              f"{row.get('error', '')[:100]}", flush=True)
        try:
            return json.loads(done.stdout) if done.returncode == 0 else None
        except json.JSONDecodeError:
            return None


def _errors(doc: Any) -> list[dict[str, Any]]:
    """The comparison records of a ``--json`` document, trimmed to what the check reports."""
    keep = ("twin", "world", "bytes", "point", "predicted_s", "measured_median_s", "rel_error",
            "predicted_peak_bytes", "measured_peak_bytes")
    records = doc.get("records", []) if isinstance(doc, dict) else []
    return [{k: r[k] for k in keep if k in r} for r in records]


def machine() -> dict[str, Any]:
    """torch, CUDA and the visible GPUs."""
    import torch

    gpus = [{"name": torch.cuda.get_device_name(i),
             "memory_bytes": torch.cuda.get_device_properties(i).total_memory}
            for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": gpus,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if gpus else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=0,
                        help="ranks (GPUs) per comparison (default: every visible GPU, ≤ 8)")
    parser.add_argument("--budget-s", type=float, default=420.0,
                        help="the whole check's time, s (default 420)")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="without GPUs, run the same steps on gloo (a dry run)")
    add_out(parser)
    args = parser.parse_args()
    info = machine()
    if not info["gpus"] and not args.allow_cpu:
        parser.exit(2, "gpu_check: no CUDA GPU is visible here; run it on a GPU machine "
                       "(or --allow-cpu for a dry run on gloo)\n")
    world = args.world or max(2, min(8, len(info["gpus"])))
    if info["gpus"] and world > len(info["gpus"]):
        parser.exit(2, f"gpu_check: --world {world} needs {world} GPUs, "
                       f"{len(info['gpus'])} visible\n")
    if args.budget_s < 60:
        parser.exit(2, f"gpu_check: --budget-s must be at least 60, got {args.budget_s:g}\n")
    backend = "nccl" if info["gpus"] else "gloo"
    worlds = ",".join(str(w) for w in sorted({2, world}))
    print(f"{len(info['gpus'])} GPU(s) {[g['name'] for g in info['gpus']]}, world {world}, "
          f"backend {backend}", flush=True)
    with tempfile.TemporaryDirectory(prefix="distml-gpu-check-") as tmp_name:
        tmp = Path(tmp_name)
        run = Run(args.budget_s, tmp)
        cal = str(tmp / "calibration.json")
        cluster = str(tmp / "cluster.json")
        run.step("calibrate", _lab("calibrate", "--backend", backend, "--quick", "--world",
                                   worlds, "--calibration", cal))
        run.step("cluster file", _lab("calibrate", "--backend", backend, "--quick", "--world",
                                      str(world), "--cluster-out", cluster))
        simulated = run.step("simulate on the cluster file", _lab(
            "simulate", "all_reduce.ring", "--cluster", cluster, "--world", str(world),
            "--sizes", "1MiB,64MiB", "--json"), 60)
        compared: dict[str, list[dict[str, Any]]] = {}
        for twin in COLLECTIVES:
            doc = run.step(f"compare {twin}", _lab(
                "compare", twin, "--backend", backend, "--quick", "--world", str(world),
                "--calibration", cal, "--json"))
            compared[twin] = _errors(doc)
        for twin in STRATEGIES:
            doc = run.step(f"compare {twin}", _lab(
                "compare", twin, "--quick", "--world", str(world), "--calibration", cal,
                "--json"))
            compared[twin] = _errors(doc)
        measured = tmp / "torchrun"
        run.step("torchrun ddp", [sys.executable, "-m", "torch.distributed.run",
                                  "--standalone", "--nproc-per-node", str(world), "-m",
                                  "lab.run", "ddp", "--quick", "--out", str(measured)])
        doc = run.step("compare ddp --measured", _lab(
            "compare", "ddp", "--measured", str(measured), "--calibration", cal, "--json"), 60)
        compared["ddp (torchrun)"] = _errors(doc)
        cluster_doc = json.loads(Path(cluster).read_text()) if Path(cluster).exists() else None
    summary = {"machine": info, "world": world, "backend": backend, "steps": run.steps,
               "cluster_file": cluster_doc, "simulated_on_cluster_file": simulated,
               "compared": compared}
    print(write_json(summary, args.out, "gpu_check"))


if __name__ == "__main__":
    main()
