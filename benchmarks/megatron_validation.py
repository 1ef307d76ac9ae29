"""Predicted vs published: Megatron-LM's weak-scaling table on DGX A100 nodes (book ch. 12).

    flock -x /tmp/distml-measure.lock .venv/bin/python benchmarks/megatron_validation.py

Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC 2021, Table 1: ten GPT models from 1.7B to 1T parameters trained on up to
3072 A100 GPUs (Selene: DGX A100 80 GB nodes, 8 HDR InfiniBand ports each — our ``a100``
preset), with their (t, p, d), global batch and the achieved TFLOP/s per GPU (the paper's
``96·B·s·l·h²·(1 + s/(6h) + V/(16lh))`` FLOPs per iteration, activation recomputation on).

For each row the simulator (:func:`simulator.tensor_parallel.simulate_megatron`) runs the
paper's (t, p, d) and batch, 1F1B, full recomputation, no sequence parallelism (it came
later), and the micro-batch in {1, 2, 4, 8} it predicts fastest (the table does not give it).
Three predictions are written side by side:

* ``default``: what ``distml-lab simulate megatron`` predicts with no options — each GEMM
  priced by its shape on the A100's GEMM model (:mod:`simulator.core.gemm`: roofline, tile
  and wave quantisation, constants from NVIDIA's data sheets and guide; a full tile at the
  measured cuBLAS ceiling, :data:`simulator.core.hardware.A100_MAMF_FRACTION`), elementwise kernels
  and the optimizer step at HBM bandwidth. Nothing taken from the table: all ten rows count.
* ``peak`` (``--matmul-efficiency 1``): every matrix multiplication at the data sheet's
  312 TFLOP/s whatever its shape, elementwise kernels at the data sheet's 2039 GB/s —
  nothing fitted. An upper bound: cuBLAS does not reach peak.
* ``row1``: the one number the data sheet cannot give — the GEMMs' achieved fraction of peak —
  taken from the table's first row (1.7B on 32 GPUs, data parallelism only: one GPU's kernels
  plus a gradient all-reduce) by solving ``predicted(row 1) = published(row 1)``; rows 2–10
  are then predictions. Row 1 is held out of the error statistics.

The table does not say which pipeline schedule ran; for rows with ``p > 1`` the interleaved
schedule (the fewest chunks ``v > 1`` that split each stage's layers) is predicted beside
1F1B.

Writes ``OUT/megatron_validation-<run id>.{json,csv}`` (new files every run: ``_output.py``);
asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from lab.megatron import (
    NARAYANAN_TABLE_1,
    best_micro_batch,
    efficiency_from_row_1,
    smallest_interleave,
)
from simulator.transformer import parameters
from simulator.transformer import preset as model_preset

from _output import add_out, write_csv, write_json

TABLE_1 = NARAYANAN_TABLE_1
best = best_micro_batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    args = parser.parse_args()
    efficiency = efficiency_from_row_1(1e-4)
    rows: list[dict[str, Any]] = []
    for i, (name, t, p, gpus, batch, published, percent) in enumerate(TABLE_1):
        default = best(name, t, p, gpus, batch)
        peak = best(name, t, p, gpus, batch, 1.0)
        row1 = best(name, t, p, gpus, batch, efficiency)
        rows.append({
            "row": i + 1, "model": name, "params_billion": parameters(model_preset(name)) / 1e9,
            "tp": t, "pp": p, "dp": gpus // (t * p), "gpus": gpus, "global_batch": batch,
            "published_tflops": published, "published_percent_of_peak": percent,
            "default_micro_batch": default.config.micro_batch,
            "default_tflops": default.tflops_per_gpu,
            "default_rel_error": default.tflops_per_gpu / published - 1,
            "default_bubble": default.bubble_fraction,
            "default_iteration_s": default.iteration_time_s,
            "peak_micro_batch": peak.config.micro_batch,
            "peak_tflops": peak.tflops_per_gpu,
            "peak_rel_error": peak.tflops_per_gpu / published - 1,
            "row1_micro_batch": row1.config.micro_batch,
            "row1_tflops": row1.tflops_per_gpu,
            "row1_rel_error": row1.tflops_per_gpu / published - 1,
            "row1_bubble": row1.bubble_fraction,
            "row1_iteration_s": row1.iteration_time_s,
            "row1_memory_GiB": row1.memory_per_gpu_bytes / 2**30,
        })
        v = smallest_interleave(name, p)
        if v > 1:  # the table does not say which schedule ran: interleaved beside 1F1B
            inter = best(name, t, p, gpus, batch, efficiency, v)
            dinter = best(name, t, p, gpus, batch, None, v)
            rows[-1].update(interleave=v, row1_interleaved_tflops=inter.tflops_per_gpu,
                            row1_interleaved_rel_error=inter.tflops_per_gpu / published - 1,
                            default_interleaved_tflops=dinter.tflops_per_gpu,
                            default_interleaved_rel_error=dinter.tflops_per_gpu / published - 1)
        r = rows[-1]
        print(f"{i + 1:>2} {name:<9} t={t} p={p:<2} d={r['dp']:<3} published {published} TF"
              f" | default {r['default_tflops']:6.1f} ({r['default_rel_error']:+.0%})"
              f" b={r['default_micro_batch']}"
              f" | peak {r['peak_tflops']:6.1f} ({r['peak_rel_error']:+.0%})"
              f" | row-1 efficiency {r['row1_tflops']:6.1f} ({r['row1_rel_error']:+.0%})"
              f" b={r['row1_micro_batch']}"
              + (f" | interleaved v={r['interleave']} {r['row1_interleaved_tflops']:6.1f} "
                 f"({r['row1_interleaved_rel_error']:+.0%})" if "interleave" in r else ""),
              flush=True)
    held_out = [abs(r["row1_rel_error"]) for r in rows[1:]]
    summary = {
        "source": "Narayanan et al. SC 2021, Table 1",
        "cluster": "a100 preset: DGX A100 80GB, NVLink 300 GB/s each way, HDR 200 Gb/s per GPU",
        "matmul_efficiency_from_row_1": efficiency,
        "default_median_abs_rel_error": statistics.median(
            abs(r["default_rel_error"]) for r in rows),
        "default_max_abs_rel_error": max(abs(r["default_rel_error"]) for r in rows),
        "default_rows_within_10_percent": sum(abs(r["default_rel_error"]) <= 0.10 for r in rows),
        "default_best_schedule_median_abs_rel_error": statistics.median(
            min(abs(r["default_rel_error"]), abs(r.get("default_interleaved_rel_error", 1.0)))
            for r in rows),
        "peak_median_abs_rel_error": statistics.median(abs(r["peak_rel_error"]) for r in rows),
        "row1_median_abs_rel_error_rows_2_10": statistics.median(held_out),
        "row1_max_abs_rel_error_rows_2_10": max(held_out),
        "row1_best_schedule_median_abs_rel_error_rows_2_10": statistics.median(
            min(abs(r["row1_rel_error"]), abs(r.get("row1_interleaved_rel_error", 1.0)))
            for r in rows[1:]),
        "records": rows,
    }
    print(f"default (GEMM model): median |error| {summary['default_median_abs_rel_error']:.1%}"
          f", max {summary['default_max_abs_rel_error']:.1%}, "
          f"{summary['default_rows_within_10_percent']}/10 rows within 10 %")
    print(f"GEMM efficiency from row 1: {efficiency:.3f}; held-out rows 2-10: median "
          f"|error| {summary['row1_median_abs_rel_error_rows_2_10']:.1%}, max "
          f"{summary['row1_max_abs_rel_error_rows_2_10']:.1%}; at peak: median "
          f"{summary['peak_median_abs_rel_error']:.1%}")
    write_json(summary, args.out, "megatron_validation")
    write_csv(rows, args.out, "megatron_validation")


if __name__ == "__main__":
    main()
