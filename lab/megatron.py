"""Chapter 12 on the command line: ``distml-lab simulate megatron`` and ``distml-lab plan``.

    distml-lab simulate megatron --model gpt3-175b --tp 8 --pp 16 --dp 8 \\
        --global-batch 1536 --micro-batch 1 --cluster a100 --json
    distml-lab simulate megatron --layers 96 --hidden 12288 --heads 96 --seq 2048 \\
        --vocab 51200 --tp 8 --pp 16 --dp 8 --global-batch 1536 --micro-batch 1 --cluster a100
    distml-lab plan --model gpt3-175b --gpus 1024 --cluster a100 --global-batch 1536 --top 10

Context, expert and fully sharded data parallelism (``--cp``, ``--ep``, ``--fsdp``) and the
mixture-of-experts presets and options (``--experts``, ``--top-k``): :mod:`lab.megatron_moe`.

Both print what :mod:`simulator.tensor_parallel` predicts on a preset cluster (``a100``,
``h100``); a model is a preset name (:data:`simulator.transformer.PRESETS`) or its shape.
Bad input is one line and exit status 2 (:class:`lab.units.UsageError`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from lab.budget import budget_argument, check_budget, elapsed_bar, show_progress
from lab.megatron_moe import (
    grid_arguments,
    moe_arguments,
    moe_model,
    plan_grid_arguments,
    plan_options,
)
from lab.units import UsageError, format_size, number, whole

MAX_GPUS = 65536
"""Most GPUs ``plan`` and ``simulate megatron`` take (a sanity bound: about today's largest
clusters)."""
MAX_SHAPE = 2**24
"""Largest layer count, width, head count, sequence length or vocabulary taken."""
MAX_PIPELINE_STEPS = 2**17
"""Most micro-batch passes ``simulate megatron`` simulates, m·p·v (each is an event; 2¹⁷ take
some 15 s)."""
MAX_PLAN_BATCH = 16384
"""Largest global batch ``plan`` takes: it simulates every configuration, the one with the
most micro-batches (b = 1, d = 1) included."""
SECONDS_PER_PASS = 1.2e-4
"""Cost of one micro-batch pass (forward and backward on one stage) in the pipeline's event
simulation, s: 2¹⁷ passes of ``simulate megatron`` take 13 s, ``plan --gpus 3072`` (375,896
passes) 43.5 s on one idle core of the development machine."""
SECONDS_PER_GPU_GROUP = 2e-7
"""Cost of cutting one group out of an N-GPU cluster (:func:`~simulator.tensor_parallel.
subcluster`), per GPU of the cluster, s; ``simulate_megatron`` cuts ``p + 3`` groups:
``plan --gpus 16384`` cuts 605 in some 2 s."""
BYTES_PER_PASS = 2.7e3
"""Memory one micro-batch pass holds while the pipeline is simulated (its events and
messages), bytes: 2¹⁷ passes peak at 350 MB."""
BYTES_PER_GPU = 2.4e3
"""Memory one GPU of a preset cluster takes (its links and routes), bytes: ``plan --gpus
65536`` peaks at 157 MB."""

SHAPE = (("layers", "transformer layers l"), ("hidden", "hidden size h"),
         ("heads", "attention heads a"), ("seq", "sequence length s"),
         ("vocab", "vocabulary size V"))


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """``--model NAME`` or the shape ``--layers … --vocab``; ``--cluster``; the options."""
    from simulator.moe_model import PRESETS as MOE
    from simulator.transformer import PRESETS

    p.add_argument("--model", help=f"a preset: {', '.join([*PRESETS, *MOE])} (or give the "
                   "shape)")
    for name, what in SHAPE:
        p.add_argument(f"--{name}", type=whole(1, MAX_SHAPE),
                       help=what + " (overrides the preset's)")
    p.add_argument("--cluster", required=True, help="a preset: a100 or h100 (DGX nodes), or "
                   "a cluster file (calibrate --cluster-out FILE.json)")
    p.add_argument("--recompute", default="full", choices=["full", "selective", "none"],
                   help="activation recomputation (default full, as Narayanan et al. 2021)")
    p.add_argument("--sequence-parallel", action="store_true",
                   help="sequence parallelism (Korthikanti et al. 2022)")
    p.add_argument("--matmul-efficiency", type=number(0, 1, lo_open=True), default=None,
                   help="run every matrix multiplication at this fraction of peak FLOP/s "
                        "(a teaching override; default: priced by shape on the GPU's GEMM "
                        "model — roofline, tile and wave quantisation)")
    moe_arguments(p)


def model_from(args: argparse.Namespace) -> Any:
    """The GPT the options describe."""
    from simulator.transformer import GPT, preset

    shape = {name: getattr(args, name) for name, _ in SHAPE}
    moe = moe_model(args, shape)
    if moe is not None:
        return moe
    if args.model:
        try:
            base = preset(args.model)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        shape = {k: v if v is not None else getattr(base, k) for k, v in shape.items()}
        name = base.name
    else:
        missing = [f"--{k}" for k, v in shape.items() if v is None]
        if missing:
            raise UsageError(f"give --model NAME or the model's shape; missing "
                             f"{', '.join(missing)}")
        name = "gpt"
    try:
        return GPT(name=name, **shape)
    except ValueError as exc:
        raise UsageError(f"invalid model: {exc}") from None


def cluster_for(name: str, gpus: int) -> Any:
    """A preset cluster of ``gpus`` GPUs (whole 8-GPU nodes), or a cluster file's
    (``calibrate --cluster-out``)."""
    from simulator.core.cluster_file import is_cluster_file, resolve

    if name not in ("a100", "h100") and not is_cluster_file(name):
        raise UsageError(f"invalid --cluster {name!r}: choose a100, h100 or a cluster file "
                         "(.json)")
    if gpus < 1:
        raise UsageError(f"need at least 1 GPU, got {gpus}")
    try:
        return resolve(name, gpus)
    except ValueError as exc:
        raise UsageError(f"invalid cluster: {exc}") from None


def _positive(args: argparse.Namespace, *names: str) -> None:
    for name in names:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"invalid --{name.replace('_', '-')} {value}: must be at least 1")


# ---- bounded work (lab.budget) -------------------------------------------------------------

def estimate(configs: Sequence[Any]) -> tuple[float, float]:
    """Seconds and peak bytes to simulate each of ``configs`` (``MegatronConfig``s on one
    cluster) with :func:`~simulator.tensor_parallel.simulate_megatron`: coarse, from the
    measured constants above."""
    from simulator.megatron_plan import passes

    if not configs:
        return 0.0, 0.0
    gpus = configs[0].grid.world_size
    seconds = sum(passes(c) * SECONDS_PER_PASS + (c.grid.p + 3) * gpus * SECONDS_PER_GPU_GROUP
                  for c in configs)
    return seconds, max(passes(c) for c in configs) * BYTES_PER_PASS + gpus * BYTES_PER_GPU


# ---- simulate megatron ---------------------------------------------------------------------

def megatron_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``distml-lab simulate megatron``."""
    add_model_arguments(p)
    for name, what in (("tp", "tensor-parallel size t"), ("pp", "pipeline stages p"),
                       ("dp", "data-parallel replicas d"),
                       ("global-batch", "sequences per iteration B"),
                       ("micro-batch", "sequences per micro-batch b")):
        p.add_argument(f"--{name}", type=whole(1, MAX_GPUS if name in ("tp", "pp", "dp")
                                               else MAX_SHAPE), required=True, help=what)
    p.add_argument("--interleave", type=whole(1, MAX_SHAPE), default=1,
                   help="model chunks per pipeline rank v (interleaved 1F1B; default 1)")
    p.add_argument("--overlap-grad-reduce", action="store_true",
                   help="all-reduce gradients during the last backward")
    grid_arguments(p)
    budget_argument(p)


def run_megatron(args: argparse.Namespace) -> dict[str, Any]:
    """``distml-lab simulate megatron``: one iteration, predicted."""
    from simulator.tensor_parallel import Grid, MegatronConfig, simulate_megatron

    _positive(args, "tp", "pp", "dp", "cp", "ep", "global_batch", "micro_batch", "interleave")
    model = model_from(args)
    try:
        grid = Grid(args.tp, args.pp, args.dp, args.cp, args.ep)
        config = MegatronConfig(model, grid, args.global_batch,
                                args.micro_batch, recompute=args.recompute,
                                sequence_parallel=args.sequence_parallel,
                                interleave=args.interleave,
                                overlap_grad_reduce=args.overlap_grad_reduce,
                                matmul_efficiency=args.matmul_efficiency, fsdp=args.fsdp)
        if config.sequence_parallel and (grid.cp > 1 or getattr(model, "experts", 0) > 0):
            raise ValueError("--sequence-parallel with --cp or experts is not modelled")
    except ValueError as exc:
        raise UsageError(f"invalid configuration: {exc}") from None
    if config.grid.world_size > MAX_GPUS:
        raise UsageError(f"invalid grid: t·p·d·cp = {config.grid.world_size} GPUs, at most "
                         f"{MAX_GPUS}")
    steps = args.global_batch // (args.micro_batch * args.dp) * args.pp * args.interleave
    if steps > MAX_PIPELINE_STEPS:
        raise UsageError(f"invalid configuration: {steps} micro-batch passes (m·p·v) to "
                         f"simulate, at most {MAX_PIPELINE_STEPS}; use fewer, larger "
                         "micro-batches")
    seconds, nbytes = estimate([config])
    check_budget(args, seconds, nbytes, "simulate megatron", "fewer, larger micro-batches")
    cluster = cluster_for(args.cluster, config.grid.world_size)
    with elapsed_bar(args, "simulate megatron", seconds):
        doc = simulate_megatron(cluster, config).as_dict()
    doc["gpu_memory_bytes"] = cluster.devices[0].memory_bytes
    doc["fits"] = doc["memory_per_gpu_bytes"] <= doc["gpu_memory_bytes"]
    return doc


def megatron_table(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Human-readable lines for ``simulate megatron`` without ``--json``."""
    mem = doc["memory"]
    return [
        ("model", f"{doc['model']}: {doc['params'] / 1e9:.1f}B parameters"),
        ("grid (t × p × d × cp)", f"{doc['tp']} × {doc['pp']} × {doc['dp']} × {doc['cp']} = "
                                  f"{doc['gpus']} GPUs on {doc['cluster']}, ep {doc['ep']}"
                                  f"{', FSDP' if doc['fsdp'] else ''}"),
        ("micro-batches per pipeline", str(doc["microbatches"])),
        ("iteration time", f"{doc['iteration_time_s']:.3f} s"),
        ("  pipeline (forward, backward)", f"{doc['pipeline_time_s']:.3f} s"),
        ("  gradient all-reduce", f"{doc['data_parallel_all_reduce_s'] * 1e3:.1f} ms"),
        ("throughput per GPU", f"{doc['tflops_per_gpu']:.1f} TFLOP/s"),
        ("pipeline bubble", f"{doc['bubble_fraction']:.1%} (formula "
                            f"{doc['bubble_fraction_formula']:.1%})"),
        ("memory per GPU", f"{format_size(doc['memory_per_gpu_bytes'])}"
                           f"{'' if doc['fits'] else '  (does NOT fit)'}"),
        ("  parameters", format_size(mem["parameters"])),
        ("  gradients", format_size(mem["gradients"])),
        ("  optimizer state", format_size(mem["optimizer_state"])),
        ("  activations", format_size(mem["activations"])),
    ]


# ---- plan ----------------------------------------------------------------------------------

def plan_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``distml-lab plan``."""
    add_model_arguments(p)
    p.add_argument("--gpus", type=whole(1, 2**62), required=True,
                   help=f"GPUs N (whole 8-GPU nodes, at most {MAX_GPUS})")
    p.add_argument("--global-batch", type=whole(1, MAX_PLAN_BATCH),
                   help=f"sequences per iteration B (default N; at most {MAX_PLAN_BATCH})")
    p.add_argument("--max-tp", type=whole(1, 64), default=8,
                   help="largest t tried (default 8: a node)")
    p.add_argument("--interleave", default="1",
                   help="chunks per pipeline rank to try, e.g. 1,2 (default 1)")
    p.add_argument("--top", type=whole(1, 10**6), default=10, help="rows to print (default 10)")
    plan_grid_arguments(p)
    budget_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--progress", action="store_true", help="a progress bar even with --json")


def run_plan(args: argparse.Namespace) -> dict[str, Any]:
    """``distml-lab plan``: every (t, p, d, micro-batch) ranked; those that do not fit skipped."""
    from tqdm import tqdm

    from simulator.megatron_plan import plan, screen

    _positive(args, "gpus", "global_batch", "max_tp", "top")
    if args.gpus > MAX_GPUS:
        raise UsageError(f"invalid --gpus {args.gpus}: plan takes at most {MAX_GPUS} GPUs (the "
                         f"cluster alone would need about {format_size(args.gpus * BYTES_PER_GPU)}"
                         f"); plan a smaller --gpus")
    try:
        interleave = [int(v) for v in args.interleave.split(",")]
    except ValueError:
        raise UsageError(f"invalid --interleave {args.interleave!r}: e.g. 1 or 1,2") from None
    if not interleave or any(not 1 <= v <= 64 for v in interleave) or len(interleave) > 16:
        raise UsageError(f"invalid --interleave {args.interleave!r}: up to 16 chunk counts "
                         "from 1 to 64")
    model = model_from(args)
    cluster = cluster_for(args.cluster, args.gpus)
    batch = args.global_batch or args.gpus
    if batch > MAX_PLAN_BATCH:
        raise UsageError(f"a global batch of {batch} sequences is more than plan simulates "
                         f"({MAX_PLAN_BATCH}); give --global-batch")
    options = {"max_t": args.max_tp, "interleave": interleave, "recompute": args.recompute,
               "sequence_parallel": args.sequence_parallel, **plan_options(args)}
    if args.matmul_efficiency is not None:
        options["matmul_efficiency"] = args.matmul_efficiency
    screened = screen(model, cluster.devices[0], args.gpus, batch, **options)
    fit = [r.config for r in screened if r.fits]
    seconds, nbytes = estimate(fit)
    check_budget(args, seconds, nbytes, f"plan on {args.gpus} GPUs ({len(fit)} configurations)",
                 "a smaller --gpus or --global-batch, fewer --interleave values, or simulate "
                 "megatron for one configuration")
    bar = tqdm(total=len(fit), desc="plan", unit="config", file=sys.stderr, leave=False,
               disable=not show_progress(args, seconds))
    try:
        rows = plan(model, cluster, batch, screened=screened,
                    simulated=lambda _: bar.update(1), **options)
    finally:
        bar.close()
    fitting = [r.as_dict() for r in rows if r.fits]
    if not fitting:
        raise UsageError(f"no configuration of {model.name} fits on {args.gpus} GPUs of "
                         f"{args.cluster} with batch {batch}")
    return {"model": model.name, "gpus": args.gpus, "cluster": cluster.name,
            "global_batch": batch, "tried": len(rows), "fitting": len(fitting),
            "skipped_out_of_memory": [r.as_dict() for r in rows if not r.fits],
            "ranked": fitting}


def plan_table(doc: dict[str, Any], top: int) -> str:
    """The ranked configurations as a text table."""
    lines = [f"{doc['model']} on {doc['gpus']} GPUs ({doc['cluster']}), batch "
             f"{doc['global_batch']}: {doc['fitting']} of {doc['tried']} configurations fit",
             f"{'rank':>4} {'t':>3} {'p':>4} {'d':>4} {'cp':>3} {'ep':>3} {'fsdp':>4} "
             f"{'b':>3} {'v':>2} {'iter (s)':>10} "
             f"{'TFLOP/s':>8} {'seq/s':>8} {'memory':>10}"]
    for i, r in enumerate(doc["ranked"][:top], 1):
        lines.append(f"{i:>4} {r['tp']:>3} {r['pp']:>4} {r['dp']:>4} {r['cp']:>3} {r['ep']:>3} "
                     f"{'yes' if r['fsdp'] else 'no':>4} {r['micro_batch']:>3} "
                     f"{r['interleave']:>2} {r['iteration_time_s']:>10.3f} "
                     f"{r['tflops_per_gpu']:>8.1f} {r['samples_per_s']:>8.2f} "
                     f"{format_size(r['memory_per_gpu_bytes']):>10}")
    return "\n".join(lines)


# ---- published results (validation) --------------------------------------------------------

NARAYANAN_TABLE_1 = [
    # (model preset, t, p, GPUs, global batch, published TFLOP/s per GPU, % of peak)
    ("gpt-1.7b", 1, 1, 32, 512, 137, 44),
    ("gpt-3.6b", 2, 1, 64, 512, 138, 44),
    ("gpt-7.5b", 4, 1, 128, 512, 142, 46),
    ("gpt-18b", 8, 1, 256, 1024, 135, 43),
    ("gpt-39b", 8, 2, 512, 1536, 138, 44),
    ("gpt-76b", 8, 4, 1024, 1792, 140, 45),
    ("gpt-145b", 8, 8, 1536, 2304, 148, 47),
    ("gpt-310b", 8, 16, 1920, 2160, 155, 50),
    ("gpt-530b", 8, 35, 2520, 2520, 163, 52),
    ("gpt-1t", 8, 64, 3072, 3072, 163, 52),
]
"""Narayanan et al., SC 2021, Table 1: weak scaling on Selene (DGX A100 80 GB, 8 HDR ports per
node), activation recomputation on, sequence length 2048, vocabulary 51200."""


def best_micro_batch(name: str, t: int, p: int, gpus: int, batch: int,
                     efficiency: float | None = None, interleave: int = 1) -> Any:
    """A published row's (t, p, d) and batch on the ``a100`` preset, simulated at the
    micro-batch in {1, 2, 4, 8} predicted fastest (the table does not give it); 1F1B, or
    interleaved 1F1B with ``interleave`` chunks. ``efficiency``: GEMMs at that fraction of
    peak (``None``: the A100's GEMM model)."""
    from simulator.core.hardware import preset
    from simulator.tensor_parallel import Grid, MegatronConfig, simulate_megatron
    from simulator.transformer import preset as model_preset

    model, d = model_preset(name), gpus // (t * p)
    cluster = preset("a100", gpus)
    results = [simulate_megatron(cluster, MegatronConfig(model, Grid(t, p, d), batch, b,
                                                         matmul_efficiency=efficiency,
                                                         interleave=interleave))
               for b in (1, 2, 4, 8) if batch % (b * d) == 0
               and (interleave == 1 or batch // (b * d) % p == 0)]
    return min(results, key=lambda r: r.iteration_time_s)


def smallest_interleave(name: str, p: int) -> int:
    """The fewest chunks per rank (> 1) that split a row's layers evenly, or 1 (none; p = 1)."""
    from simulator.transformer import preset as model_preset

    per_stage = model_preset(name).layers // p
    return next((v for v in range(2, per_stage + 1) if per_stage % v == 0), 1) if p > 1 else 1


def efficiency_from_row_1(tol: float = 1e-3) -> float:
    """The GEMM efficiency (fraction of peak) at which Table 1's first row — 1.7B on 32 GPUs,
    data parallelism only — is predicted at its published TFLOP/s (bisection: the prediction
    grows with the efficiency). The only number the validation takes from the table."""
    name, t, p, gpus, batch, published, _ = NARAYANAN_TABLE_1[0]
    lo, hi = 0.05, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if best_micro_batch(name, t, p, gpus, batch, mid).tflops_per_gpu < published:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
