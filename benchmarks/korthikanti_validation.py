"""Predicted vs published: Korthikanti et al.'s end-to-end iteration times (book ch. 12).

    flock -x /tmp/distml-measure.lock .venv/bin/python benchmarks/korthikanti_validation.py

Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys
2023 (arXiv:2205.05198): Table 3 gives four GPT models (22B, 175B, 530B, 1T; sequence 2048,
vocabulary 51200) with their tensor- and pipeline-parallel sizes, GPUs and global batch on
DGX A100 80 GB nodes (our ``a100`` preset); Table 5 the measured iteration time of each, once
with full activation recomputation (no sequence parallelism) and once with sequence
parallelism and selective recomputation ("present work"), from which §6.3 derives the model
FLOPs utilisation (MFU: ``72·B·s·l·h²·(1 + s/(6h) + V/(12lh))`` model FLOPs per iteration,
no recomputation counted, over 312 TFLOP/s per GPU).

For each of the eight (model, method) rows :func:`simulator.tensor_parallel.simulate_megatron`
runs the paper's (t, p, d = 1) and batch with the same recomputation and sequence
parallelism, on the defaults of ``distml-lab simulate megatron`` — each GEMM priced by its
shape on the A100's GEMM model (:mod:`simulator.core.gemm`; full tiles at the measured cuBLAS
ceiling, not at peak), elementwise kernels at HBM
bandwidth. Nothing is taken from the tables but the configurations. The micro-batch is the one
in {1, 2, 4, 8} the simulator predicts fastest, and for ``p > 1`` the interleaved schedule
(the fewest chunks ``v > 1`` that split a stage's layers) is predicted beside 1F1B, as in
``megatron_validation.py`` (the paper gives neither).

Writes ``OUT/korthikanti_validation-<run id>.{json,csv}``; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from lab.megatron import smallest_interleave

from _output import add_out, write_csv, write_json

PEAK_FLOPS = 312e12
"""A100 dense FP16/BF16 tensor-core peak, FLOP/s (NVIDIA A100 data sheet): the MFU's
denominator in the paper."""

TABLE_5 = [
    # (model preset, t, p, GPUs, global batch, full recomputation s, present work s)
    ("gpt-22b", 8, 1, 8, 4, 1.42, 1.10),
    ("gpt3-175b", 8, 8, 64, 64, 18.13, 13.75),
    ("gpt-530b", 8, 35, 280, 280, 49.05, 37.83),
    ("gpt-1t", 8, 64, 512, 512, 94.42, 71.49),
]
"""Korthikanti et al. 2022, Tables 3 and 5: configuration and iteration time (s)."""

PUBLISHED_MFU = {"gpt-22b": 0.415, "gpt3-175b": 0.514, "gpt-530b": 0.560, "gpt-1t": 0.563}
"""§6.3, Table 5: the present work's model FLOPs utilisation — a check on the transcription
(:func:`model_flops` over the present work's time must give it back)."""

METHODS = {"full": ("full", False), "present": ("selective", True)}
"""Table 5's two columns: (recomputation, sequence parallelism)."""


def model_flops(name: str, batch: int) -> float:
    """The paper's model FLOPs per iteration, ``72·B·s·l·h²·(1 + s/(6h) + V/(12lh))``."""
    from simulator.transformer import preset as model_preset

    m = model_preset(name)
    layers, h, s, v = m.layers, m.hidden, m.seq, m.vocab
    return 72 * batch * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))


def simulate(name: str, t: int, p: int, gpus: int, batch: int, method: str,
             interleave: int = 1) -> Any:
    """The row simulated at its fastest micro-batch in {1, 2, 4, 8}."""
    from simulator.core.hardware import preset
    from simulator.tensor_parallel import Grid, MegatronConfig, simulate_megatron
    from simulator.transformer import preset as model_preset

    recompute, sp = METHODS[method]
    model, d = model_preset(name), gpus // (t * p)
    cluster = preset("a100", gpus)
    results = [simulate_megatron(cluster, MegatronConfig(
                   model, Grid(t, p, d), batch, b, recompute=recompute, sequence_parallel=sp,
                   interleave=interleave))
               for b in (1, 2, 4, 8) if batch % (b * d) == 0
               and (interleave == 1 or batch // (b * d) % p == 0)]
    return min(results, key=lambda r: r.iteration_time_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out(parser)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for name, t, p, gpus, batch, full_s, present_s in TABLE_5:
        flops = model_flops(name, batch)
        for method, published in (("full", full_s), ("present", present_s)):
            got = simulate(name, t, p, gpus, batch, method)
            row = {"model": name, "method": method, "tp": t, "pp": p, "gpus": gpus,
                   "global_batch": batch, "published_iteration_s": published,
                   "published_mfu": flops / published / gpus / PEAK_FLOPS,
                   "micro_batch": got.config.micro_batch,
                   "predicted_iteration_s": got.iteration_time_s,
                   "predicted_mfu": flops / got.iteration_time_s / gpus / PEAK_FLOPS,
                   "rel_error": got.iteration_time_s / published - 1,
                   "bubble": got.bubble_fraction}
            v = smallest_interleave(name, p)
            if v > 1:
                inter = simulate(name, t, p, gpus, batch, method, v)
                row.update(interleave=v, interleaved_iteration_s=inter.iteration_time_s,
                           interleaved_rel_error=inter.iteration_time_s / published - 1)
            rows.append(row)
            print(f"{name:<9} {method:<7} t={t} p={p:<2} published {published:6.2f} s "
                  f"(MFU {row['published_mfu']:.1%}) | predicted "
                  f"{row['predicted_iteration_s']:6.2f} s ({row['rel_error']:+.0%}) b="
                  f"{row['micro_batch']}" + (
                      f" | interleaved v={v} {row['interleaved_iteration_s']:6.2f} s "
                      f"({row['interleaved_rel_error']:+.0%})" if v > 1 else ""), flush=True)
    errors = [abs(r["rel_error"]) for r in rows]
    best = [min(abs(r["rel_error"]), abs(r.get("interleaved_rel_error", 1.0))) for r in rows]
    summary = {
        "source": "Korthikanti et al. MLSys 2023 (arXiv:2205.05198), Tables 3 and 5",
        "cluster": "a100 preset: DGX A100 80GB, NVLink 300 GB/s each way, HDR 200 Gb/s per GPU",
        "median_abs_rel_error": statistics.median(errors),
        "max_abs_rel_error": max(errors),
        "rows_within_10_percent": sum(e <= 0.10 for e in errors),
        "best_schedule_median_abs_rel_error": statistics.median(best),
        "speedup_published": {r[0]: r[5] / r[6] for r in TABLE_5},
        "speedup_predicted": {rows[2 * i]["model"]: rows[2 * i]["predicted_iteration_s"]
                              / rows[2 * i + 1]["predicted_iteration_s"]
                              for i in range(len(TABLE_5))},
        "records": rows,
    }
    print(f"median |error| {summary['median_abs_rel_error']:.1%}, max "
          f"{summary['max_abs_rel_error']:.1%}, {summary['rows_within_10_percent']}/"
          f"{len(rows)} rows within 10 %")
    write_json(summary, args.out, "korthikanti_validation")
    write_csv(rows, args.out, "korthikanti_validation")


if __name__ == "__main__":
    main()
