"""``distml-lab simulate horovod``: one Horovod step predicted from the calibration file alone.

Chapter 7. The command's options (:func:`simulate_arguments`), the prediction
(:func:`run_simulate`: :func:`simulator.horovod.predict_step` on this machine's calibration or a
preset cluster, our DDP's step beside it, and the self-clocked cycle of
{eq}`eq-horovod-cycle`) and its table (:func:`simulate_table`). Registered in
:mod:`lab.simulate_models`.
"""

from __future__ import annotations

import math
from typing import Any

from lab.budget import budget_argument, check_budget, elapsed_bar
from lab.horovod_predict import (
    DEFAULT_BATCH,
    DEFAULT_WIDTHS,
    MiB,
    costs,
    negotiation_bytes,
    settings,
)
from lab.horovod_primitives import Primitives
from simulator.horovod import HorovodCosts, predict_step
from simulator.host.effects import BUSY_HOST
from simulator.host.factory import local_cluster

MAX_LAYERS = 1000
"""Most widths ``--widths`` takes (each layer is a tensor the simulated step reduces)."""
MAX_WIDTH = 2**20
"""Widest layer, and largest batch, ``simulate horovod`` takes."""
MIN_CYCLE_TIME_MS = 0.001
"""Shortest cycle time ``simulate horovod`` takes, ms: every cycle is simulated."""


def _widths(text: str) -> list[int]:
    from lab.units import UsageError

    try:
        if "x" in text:
            width, _, count = text.partition("x")
            widths = [int(width)] * min(int(count), MAX_LAYERS + 1)
        else:
            widths = [int(w) for w in text.split(",")]
    except ValueError:
        widths = []
    if not 2 <= len(widths) <= MAX_LAYERS or not 1 <= min(widths) <= max(widths) <= MAX_WIDTH:
        raise UsageError(f"invalid --widths {text!r}: expected 2 to {MAX_LAYERS} widths from 1 "
                         f"to {MAX_WIDTH}, like 1024x7 (seven 1024s) or 784,512,10")
    return widths


SECONDS_PER_RANK_PAIR = 4.2e-4
"""Cost of ``simulate horovod`` per rank², s, plus :data:`SECONDS_PER_RANK_PAIR_TENSOR` per
tensor: every rank's negotiation and fused all-reduces are events among all ranks. Fitted to
``--cluster h100``: 64 ranks 1.7 s (7 layers, 12 tensors) and 3.3 s (27 layers), 256 ranks
38 s."""
SECONDS_PER_RANK_PAIR_TENSOR = 1.3e-5
"""See :data:`SECONDS_PER_RANK_PAIR`, s per rank² per tensor."""


def estimate_s(world: int, tensors: int) -> float:
    """Seconds ``simulate horovod`` takes on ``world`` ranks for ``tensors`` tensors (coarse)."""
    return world**2 * (SECONDS_PER_RANK_PAIR + tensors * SECONDS_PER_RANK_PAIR_TENSOR)


def simulate_arguments(p: Any) -> None:
    """Options of ``distml-lab simulate horovod`` (out-of-range values: one line, exit 2)."""
    from lab.checks import MAX_SIMULATED_RANKS
    from lab.units import number, whole

    p.add_argument("--world", type=whole(1, MAX_SIMULATED_RANKS), required=True,
                   help=f"ranks p (1-{MAX_SIMULATED_RANKS})")
    p.add_argument("--fusion-threshold-mb", type=number(0, 2**20), default=128.0,
                   help="HOROVOD_FUSION_THRESHOLD in MiB (default 128; 0: no fusion)")
    p.add_argument("--cycle-time-ms", type=number(MIN_CYCLE_TIME_MS, 1e4), default=1.0,
                   help=f"HOROVOD_CYCLE_TIME in ms ({MIN_CYCLE_TIME_MS:g}-10000, default 1)")
    p.add_argument("--widths", default="x".join(map(str, (DEFAULT_WIDTHS[0],
                                                          len(DEFAULT_WIDTHS)))),
                   help="the MLP's layer widths: 1024x7 or 784,512,10 (default 1024x7)")
    p.add_argument("--batch", type=whole(1, MAX_WIDTH), default=DEFAULT_BATCH,
                   help="rows per rank (default 32)")
    p.add_argument("--cluster", default="local",
                   help="local (this machine's calibration, ranks sharing its cores; the "
                        "default) or a preset: a100, h100, ethernet-10g")
    p.add_argument("--small-latency-us", type=number(0, 1e6, lo_open=True),
                   help="local only: one-way time of an 8-byte message, idle, µs (measured by "
                        "lab.horovod.small_message_latency_s; default: the calibration's α)")
    p.add_argument("--busy-latency-us", type=number(0, 1e6, lo_open=True),
                   help="local only: the same beside computing main threads, µs (default: "
                        "as idle)")
    budget_argument(p)


def run_simulate(args: Any) -> dict[str, Any]:
    """``distml-lab simulate horovod``: one step predicted, with our DDP's beside it."""
    from lab.units import UsageError
    from simulator.core.calibration import find_entry
    from simulator.core.hardware import preset
    from simulator.ddp import mlp_workload
    from simulator.ddp import predict_step as predict_ddp
    from simulator.horovod import cycle_fixed_point

    if args.world < 1:
        raise UsageError(f"invalid --world {args.world}: needs at least 1 rank")
    if not (args.fusion_threshold_mb >= 0 and math.isfinite(args.fusion_threshold_mb)):
        raise UsageError(f"invalid --fusion-threshold-mb {args.fusion_threshold_mb}: "
                         "give a number of MiB ≥ 0")
    if not (args.cycle_time_ms > 0 and math.isfinite(args.cycle_time_ms)):
        raise UsageError(f"invalid --cycle-time-ms {args.cycle_time_ms}: give a number of "
                         "ms > 0")
    if args.batch < 1:
        raise UsageError(f"invalid --batch {args.batch}: needs at least 1 row")
    widths = _widths(args.widths)
    for name in ("small_latency_us", "busy_latency_us"):
        value = getattr(args, name)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise UsageError(f"invalid --{name.replace('_', '-')} {value}: give a number of "
                             "µs > 0")
    seconds = estimate_s(args.world, 2 * (len(widths) - 1))  # a weight and a bias per layer
    check_budget(args, seconds, 0.0, f"simulate horovod on {args.world} ranks",
                 "a smaller --world (64 ranks take about 2 s)")
    cores = math.inf
    if args.cluster == "local":
        entry = find_entry(args.world)
        cluster = local_cluster(entry, effects=BUSY_HOST)
        cores = float(entry.cores)
        workload = mlp_workload(widths, args.batch, cluster.devices[0].flops_per_s)
        small = (args.small_latency_us or 0.0) * 1e-6
        busy = (args.busy_latency_us or args.small_latency_us or 0.0) * 1e-6
        optimizer_s = workload.param_bytes / cluster.devices[0].reduce_Bps
        engine_costs = costs(entry, args.world,
                             Primitives(workload, optimizer_s, 1, small, busy, None))
    else:
        if args.small_latency_us is not None or args.busy_latency_us is not None:
            raise UsageError("--small-latency-us and --busy-latency-us price this machine: "
                             "use them with --cluster local")
        cluster = preset(args.cluster, args.world)
        workload = mlp_workload(widths, args.batch, cluster.devices[0].flops_per_s)
        engine_costs = HorovodCosts.on(cluster, negotiation_bytes(len(workload.param_sizes)))
    chosen = settings(args.fusion_threshold_mb, args.cycle_time_ms, args.world)
    with elapsed_bar(args, "simulate horovod", seconds):
        prediction = predict_step(cluster, workload, chosen, engine_costs, cores=cores)
        ddp = predict_ddp(cluster, workload, cores=cores)
    fixed = None
    if args.world > 1:  # a and β' of the all-reduce, read off it at two sizes
        small, large = 1 * MiB, 64 * MiB
        beta_prime = ((engine_costs.all_reduce_s(large) - engine_costs.all_reduce_s(small))
                      / (large - small))
        a = max(engine_costs.all_reduce_s(small) - small * beta_prime, 0.0)
        backward = sum(layer.backward_s for layer in workload.layers)
        point = cycle_fixed_point(workload.param_bytes, backward, a, beta_prime,
                                  engine_costs.negotiation_s)
        fixed = None if point is None else {"cycle_s": point[0], "fused_bytes": point[1],
                                            "a_s": a, "beta_prime_s_per_B": beta_prime}
    return {"world": args.world, "cluster": cluster.name, "widths": widths,
            "batch": args.batch, "parameter_bytes": workload.param_bytes,
            "tensors": len(workload.param_sizes),
            "fusion_threshold_bytes": chosen.fusion_threshold_bytes,
            "cycle_time_s": chosen.cycle_time_s, "step_s": prediction.step_s,
            "backward_end_s": prediction.backward_end_s,
            "exposed_comm_s": prediction.exposed_comm_s, "cycles": prediction.cycles,
            "fused_all_reduces": prediction.all_reduces,
            "fused_bytes": prediction.fused_bytes,
            "negotiation_s": engine_costs.negotiation_s,
            "negotiation_busy_s": engine_costs.negotiation(busy=True), "ddp_step_s": ddp.step_s,
            "self_clocked_cycle": fixed}


def simulate_table(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Human-readable lines for ``simulate horovod`` without ``--json``."""
    from lab.units import format_size

    def ms(seconds: float) -> str:
        return f"{seconds * 1e3:.2f} ms"

    lines = [("cluster", doc["cluster"]),
             ("model", f"MLP {doc['widths']}, batch {doc['batch']}, "
                       f"{format_size(doc['parameter_bytes'])} in {doc['tensors']} tensors"),
             ("fusion threshold", format_size(doc["fusion_threshold_bytes"])),
             ("cycle time", ms(doc["cycle_time_s"])),
             ("step time", ms(doc["step_s"])),
             ("end of backward", ms(doc["backward_end_s"])),
             ("exposed communication", ms(doc["exposed_comm_s"])),
             ("background-thread cycles", str(doc["cycles"])),
             ("fused all-reduces", str(doc["fused_all_reduces"])),
             ("negotiation (bit-vector all-reduce)", ms(doc["negotiation_s"])),
             ("  while the main threads compute", ms(doc["negotiation_busy_s"])),
             ("our DDP's step (25 MiB buckets)", ms(doc["ddp_step_s"]))]
    if doc["self_clocked_cycle"]:
        fixed = doc["self_clocked_cycle"]
        lines.append(("self-clocked cycle L (eq-horovod-cycle)",
                      f"{ms(fixed['cycle_s'])}, {format_size(fixed['fused_bytes'])} fused"))
    return lines
