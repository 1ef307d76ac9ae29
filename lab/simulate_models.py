"""``distml-lab simulate MODEL …``: whole-system simulators that take a model, not a message size.

``distml-lab simulate TWIN`` sweeps a twin over message sizes; the commands here instead
describe a training configuration and print what the simulator predicts for it. Each entry of
:data:`MODELS` adds its own options to a parser and returns one JSON-able document; chapters add
theirs to it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lab.budget import budget_argument, check_budget, elapsed_bar
from lab.checks import MAX_SIMULATED_RANKS, check_simulated_world
from lab.units import UsageError, parse_count, whole

MAX_PARAMS = 10**15
"""Largest model ``simulate zero`` takes, parameters (a thousand times today's largest)."""
MAX_CLOSED_FORM_RANKS = 2**24
"""Most data-parallel ranks the closed forms take (no simulation: only sanity)."""
ZERO_SECONDS_PER_RANK_PAIR = 4.5e-7
"""Cost of ``simulate zero --cluster`` per (data-parallel rank)², s: its collectives' events
grow about quadratically; ``--stage 3 --cluster a100 --dp 4096`` took 7.6 s."""
ZERO_BYTES_PER_RANK_PAIR = 42.0
"""Memory of the same per (rank)², bytes: 700 MB at 4096 ranks."""


@dataclass(frozen=True)
class ModelCommand:
    """One ``distml-lab simulate NAME``: its help line, its options, how it runs, and how its
    document reads as a two-column table without ``--json``."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict[str, Any]]
    lines: Callable[[dict[str, Any]], list[tuple[str, str]]]


MODELS: dict[str, ModelCommand] = {}


# ---- ZeRO (chapter 14) ----------------------------------------------------------------------

def _zero_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", required=True, help="parameters Ψ, e.g. 7.5B or 1.5e9")
    p.add_argument("--stage", type=int, required=True, choices=[0, 1, 2, 3],
                   help="ZeRO stage (0 = plain data parallelism)")
    p.add_argument("--dp", type=whole(1, MAX_CLOSED_FORM_RANKS), required=True,
                   help=f"data-parallel ranks N_d (with --cluster at most {MAX_SIMULATED_RANKS})")
    p.add_argument("--precision", default="mixed", choices=["mixed", "fp32"])
    p.add_argument("--optimizer", default="adam", choices=["adam", "momentum", "sgd"])
    p.add_argument("--cluster", help="also time the step's collectives on a preset: a100, h100, "
                   "ethernet-10g (dp ranks)")
    budget_argument(p)


def run_zero(args: argparse.Namespace) -> dict[str, Any]:
    """``distml-lab simulate zero``."""
    from simulator.core.hardware import preset
    from simulator.zero import simulate_zero

    params = parse_count(args.params, "--params", most=MAX_PARAMS)
    cluster, seconds = None, 0.0
    if args.cluster:
        if args.dp > MAX_SIMULATED_RANKS:
            raise UsageError(f"invalid --dp {args.dp} with --cluster: the simulator takes at most "
                             f"{MAX_SIMULATED_RANKS} ranks; drop --cluster for the closed forms "
                             f"(up to {MAX_CLOSED_FORM_RANKS} ranks)")
        check_simulated_world(args.dp, "--dp")
        if args.cluster == "local":
            raise UsageError("--cluster takes a preset (a100, h100, ethernet-10g), not local")
        seconds = ZERO_SECONDS_PER_RANK_PAIR * args.dp**2
        check_budget(args, seconds, ZERO_BYTES_PER_RANK_PAIR * args.dp**2,
                     f"simulate zero --cluster on {args.dp} ranks",
                     "a smaller --dp, or no --cluster for the closed forms")
        cluster = preset(args.cluster, args.dp)
    with elapsed_bar(args, "simulate zero", seconds):
        return simulate_zero(params, args.stage, args.dp, args.precision, args.optimizer,
                             cluster)


def zero_table(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Human-readable lines for ``simulate zero`` without ``--json``."""
    from lab.units import format_size

    states = doc["model_states"]
    lines = [("model states per device", format_size(states["total"])),
             ("  parameters", format_size(states["parameters"])),
             ("  gradients", format_size(states["gradients"])),
             ("  optimizer state", format_size(states["optimizer"])),
             ("replicated (stage 0) would be", format_size(doc["replicated_bytes_per_device"])),
             ("sent per rank per step", format_size(doc["communication_bytes_per_step"]))]
    if "communication_time_s" in doc:
        lines.append((f"communication on {doc['cluster']}",
                      f"{doc['communication_time_s'] * 1e3:.1f} ms"))
    return lines


MODELS["zero"] = ModelCommand("ZeRO stages: model-state memory and traffic per device",
                              _zero_arguments, run_zero, zero_table)


# ---- Megatron 3D parallelism (chapter 12): see lab/megatron.py ------------------------------

def _megatron_command() -> ModelCommand:
    from lab.megatron import megatron_arguments, megatron_table, run_megatron

    return ModelCommand("Megatron-LM: a GPT on t × p × d GPUs, one iteration predicted",
                        megatron_arguments, run_megatron, megatron_table)


MODELS["megatron"] = _megatron_command()


# ---- Horovod (chapter 7): see lab/horovod_simulate.py ----------------------------------------

def _horovod_command() -> ModelCommand:
    from lab.horovod_simulate import run_simulate, simulate_arguments, simulate_table

    return ModelCommand("Horovod: one training step with the background thread's cycles, "
                        "negotiation and tensor fusion", simulate_arguments, run_simulate,
                        simulate_table)


MODELS["horovod"] = _horovod_command()


def build_parser(name: str, prog: str, parser_class: type[argparse.ArgumentParser]
                 ) -> argparse.ArgumentParser:
    """The parser of ``distml-lab simulate NAME``."""
    command = MODELS[name]
    p = parser_class(prog=f"{prog} simulate {name}", description=command.help)
    command.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--progress", action="store_true", help="a progress bar even with --json")
    return p
