"""Tensor parallelism on this machine: predicted vs measured step time, and our MLP vs DTensor.

    OMP_NUM_THREADS=1 flock -x /tmp/distml-measure.lock .venv/bin/python \
        benchmarks/tensor_parallel_accuracy.py [--worlds 2,4] [--repeats 15] \
        [--profile-repeats 20] [--out benchmarks/results]

One world per run keeps each exclusive run short (``--worlds 2`` ~30 s with 20 repeats,
``--worlds 4`` ~1 min with 10); each run writes its own files.

For the chapter's small GPT (2 layers, h = 32, 4 heads, vocabulary 64, sequence 16, global batch
8) on every ``t × d`` grid of each world size, with and without sequence parallelism where
``t > 1``, and every ``t × p × d`` grid with ``p > 1`` (:mod:`backends.megatron`, 1F1B):

* **predicted** — :func:`lab.tensor_parallel.predict`: a rank's step profiled with its
  collectives stood in (compute between collectives, :func:`lab.tensor_parallel.profile_ops`,
  :func:`~lab.tensor_parallel.profile_stages`), by default (``--profile rounds``) on
  ``min(world, cores)`` processes at once in the measurement's own rounds, each piece right
  after a blocking wait, at its slowest copy, the mean over the samples
  (:class:`lab.tensor_parallel.Conditions`; ``--profile after-wait``: the same before the
  measurement; ``together``: back to back; ``alone``: one process back to back;
  ``--no-slowest``, ``--statistic median``), replayed on this machine's calibrated cluster
  (``local_host_cluster``; ``distml-lab calibrate --world N`` first) with the latency of the
  waiting primitive, the ranks sharing the host's cores
  (:class:`simulator.core.cores.CorePool`);
* **measured** — :class:`backends.tensor_parallel.ParallelGPT` trained on real processes,
  the slowest rank's time per step, median (p10, p90) of barrier-aligned repeats of
  ``--steps`` (3) steps back to back — as training runs them; one step after a barrier
  would add the barrier's release skew — all the world's grids timed in interleaved rounds
  in ONE spawned group.

Also times our :class:`~backends.tensor_parallel.ParallelMLP` against PyTorch's
``parallelize_module`` (ColwiseParallel / RowwiseParallel) side by side in the same rounds:
the speed ratio (ours / DTensor; < 1 means ours is faster).

A **probe** separates the network model from the step: one 8 KB all-reduce alone (right
after a barrier), 13 of them back to back, and 13 each after 100 µs of busy compute (the
step's pattern), measured and predicted the same way.

Writes ``tensor_parallel_accuracy-<run id>.json``/``.csv`` (new files every run: ``_output.py``);
prints each point and the median |relative error|. Asserts nothing. Run it under the exclusive
measurement lock (the command above).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import torch

from backends.launch import spawn
from lab.pipeline import host_cores, local_cluster
from lab.tensor_parallel import (
    GridPoint,
    compute_seconds,
    measure_rank,
    mlp_speed_rank,
    point_fields,
    predict,
    probe_ops,
    probe_rank,
    profile_ops,
    profile_stages,
    profile_together_rank,
    waiting_cluster,
)
from lab.units import parse_worlds

from _output import add_out, write_csv, write_json


def grid_points(world: int) -> list[GridPoint]:
    """Every ``t × d`` grid of ``world`` ranks the small GPT splits over, SP where t > 1, and
    every ``t × p × d`` grid with ``p > 1`` (1F1B, ``m = 8 / (d·2)`` micro-batches, at least
    ``p``)."""
    out = []
    for t in range(1, world + 1):
        if world % t or 4 % t:  # 4 heads
            continue
        for sp in (False, True) if t > 1 else (False,):
            out.append(GridPoint(t=t, d=world // t, sequence_parallel=sp))
    for p in range(2, world + 1):
        for t in (1, 2, 4):
            if world % (t * p):
                continue
            d = world // (t * p)
            out.append(GridPoint(t=t, d=d, p=p, microbatches=max(p, 8 // d // 2)))
    return out


def _collectives(point: GridPoint, ops: Any) -> int:
    """Collectives one rank (the first stage's, with a pipeline) runs in a step."""
    if point.p == 1:
        return sum(k != "compute" for k, _, _ in ops)
    first = ops[0]
    return sum(k != "compute" for k, _, _ in first.finish) + point.microbatches * sum(
        k != "compute" for k, _, _ in first.forward + first.backward)


def run_world(world: int, repeats: int, profile_repeats: int, cores: int,
              profile: str = "rounds", steps: int = 3, slowest: bool = True,
              statistic: str = "mean") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Profile, predict and measure every grid of ``world`` ranks; the MLP speed ratio."""
    points = grid_points(world)
    fields = [point_fields(p) for p in points]
    torch.set_num_threads(1)  # the ranks run single-threaded (OMP_NUM_THREADS=1)
    copies = min(world, cores)
    if profile == "rounds":  # in the measurement's own rounds (measure_rank)
        got_all = spawn(measure_rank, world, fields, repeats, steps, copies, slowest,
                        statistic, timeout=120)[0]
        profiles = {p.name: ops for p, ops in zip(points, got_all["profiles"], strict=True)}
    else:
        if profile == "alone":
            profiles = {p.name: profile_ops(p, profile_repeats) if p.p == 1
                        else profile_stages(p, profile_repeats) for p in points}
        else:  # before the measurement, with min(world, cores) copies at once
            got = spawn(profile_together_rank, copies, fields, profile_repeats,
                        profile == "after-wait", slowest, statistic, timeout=120)[0]
            profiles = {p.name: ops for p, ops in zip(points, got, strict=True)}
        got_all = spawn(measure_rank, world, fields, repeats, steps, timeout=120)[0]
    measured = got_all["points"]
    cluster, described = waiting_cluster(world, got_all["exchange_s"])
    median_cluster, _ = local_cluster(world)
    rows = []
    for point, got in zip(points, measured, strict=True):
        ops = profiles[point.name]
        predicted = predict(point, ops, cluster, cores)
        one_core = predict(point, ops, cluster)
        with_median = predict(point, ops, median_cluster, cores)
        rows.append({
            "world": world, "grid": point.name, "t": point.t, "p": point.p, "d": point.d,
            "microbatches": point.microbatches,
            "sequence_parallel": point.sequence_parallel, "cluster": described,
            "cores": cores, "collectives_per_step": _collectives(point, ops),
            "profile_compute_s": compute_seconds(ops, point.microbatches),
            "predicted_s": predicted, "predicted_core_per_rank_s": one_core,
            "predicted_median_latency_s": with_median,
            "exchange_in_chain_s": got_all["exchange_s"],
            "exchange_back_to_back_s": got_all["exchange_back_to_back_s"],
            "fragment_s": got_all["fragment_s"],
            "measured_s": got["median_s"], "measured_p10_s": got["p10_s"],
            "measured_p90_s": got["p90_s"],
            "relative_error": (predicted - got["median_s"]) / got["median_s"]})
    mlp = spawn(mlp_speed_rank, world, 64, 256, repeats, timeout=120)[0]
    # the probe: one 8 KB all-reduce alone, and 13 of them each after 100 µs of compute
    nbytes, compute_s, count = 8192, 1e-4, 13
    probe = spawn(probe_rank, world, nbytes, compute_s, count, repeats, timeout=120)[0]
    whole = GridPoint(t=world, d=1)
    mlp["probe"] = {
        "nbytes": nbytes, "compute_s": compute_s, "count": count,
        "alone_measured_s": probe["alone_s"],
        "alone_predicted_s": predict(whole, probe_ops(nbytes, 0.0, 1), cluster, cores),
        "back_to_back_measured_s": probe["back_to_back_s"],
        "back_to_back_predicted_s": predict(whole, probe_ops(nbytes, 0.0, count), cluster,
                                            cores),
        "interleaved_measured_s": probe["interleaved_s"],
        "interleaved_predicted_s": predict(whole, probe_ops(nbytes, compute_s, count), cluster,
                                           cores)}
    return rows, mlp


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--profile-repeats", type=int, default=20)
    ap.add_argument("--cores", type=int, default=0, help="host cores (0: this host's)")
    ap.add_argument("--slowest", action=argparse.BooleanOptionalAction, default=True,
                    help="each piece of compute: the slowest of the copies profiling at once")
    ap.add_argument("--statistic", choices=("median", "mean"), default="mean",
                    help="of each piece of compute over the profile's samples")
    ap.add_argument("--steps", type=int, default=3,
                    help="training steps back to back per timed sample (the time per step)")
    ap.add_argument("--profile", choices=("rounds", "after-wait", "together", "alone"),
                    default="rounds",
                    help="profile the compute with min(world, cores) copies at once, each "
                         "piece right after a blocking wait, in the measurement's own rounds "
                         "(rounds) or before it (after-wait); before it back to back "
                         "(together); or on one process back to back (alone)")
    add_out(ap)
    args = ap.parse_args(argv)
    try:
        worlds = parse_worlds(args.worlds)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    cores = args.cores or host_cores()
    rows: list[dict[str, Any]] = []
    mlps = []
    for world in worlds:
        got, mlp = run_world(world, args.repeats, args.profile_repeats, cores, args.profile,
                             args.steps, args.slowest, args.statistic)
        rows += got
        mlps.append(mlp)
        for r in got:
            print(f"world {r['world']} {r['grid']:9s} predicted {r['predicted_s'] * 1e3:7.2f} ms"
                  f"  measured {r['measured_s'] * 1e3:7.2f} ms (p10 {r['measured_p10_s'] * 1e3:.2f}"
                  f", p90 {r['measured_p90_s'] * 1e3:.2f})  error {r['relative_error']:+.1%}"
                  f"  [compute {r['profile_compute_s'] * 1e3:.2f} ms, "
                  f"{r['collectives_per_step']} collectives; with the calibration's median "
                  f"latency {r['predicted_median_latency_s'] * 1e3:.2f} ms]")
        print(f"world {world} waiting primitive: a 4 KB ring step adds "
              f"{got[0]['exchange_in_chain_s'] * 1e6:.0f} µs to a chain of compute "
              f"(fragment {got[0]['fragment_s'] * 1e6:.0f} µs), "
              f"{got[0]['exchange_back_to_back_s'] * 1e6:.0f} µs back to back (means)")
        print(f"world {world} MLP (h=64, 256 tokens) ours {mlp['ours']['median_s'] * 1e6:.0f} µs"
              f" vs DTensor {mlp['dtensor']['median_s'] * 1e6:.0f} µs: ratio {mlp['ratio']:.2f}")
        pr = mlp["probe"]
        print(f"world {world} probe: one {pr['nbytes']} B all-reduce alone measured "
              f"{pr['alone_measured_s'] * 1e3:.3f} ms, predicted "
              f"{pr['alone_predicted_s'] * 1e3:.3f} ms; {pr['count']} back to back measured "
              f"{pr['back_to_back_measured_s'] * 1e3:.2f} ms, predicted "
              f"{pr['back_to_back_predicted_s'] * 1e3:.2f} ms; {pr['count']} × "
              f"({pr['compute_s'] * 1e6:.0f} µs compute + all-reduce) measured "
              f"{pr['interleaved_measured_s'] * 1e3:.2f} ms, "
              f"predicted {pr['interleaved_predicted_s'] * 1e3:.2f} ms")
    errors = [abs(r["relative_error"]) for r in rows]
    summary = {"median_abs_relative_error": statistics.median(errors),
               "max_abs_relative_error": max(errors), "points": len(rows), "cores": cores,
               "per_world": {w: statistics.median(abs(r["relative_error"]) for r in rows
                                                  if r["world"] == w) for w in worlds}}
    print(f"median |relative error| {summary['median_abs_relative_error']:.1%} over "
          f"{len(rows)} points (max {summary['max_abs_relative_error']:.1%})")
    write_json({"summary": summary, "points": rows, "mlp_vs_dtensor": mlps},
               args.out, "tensor_parallel_accuracy")
    write_csv(rows, args.out, "tensor_parallel_accuracy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
