"""Context, expert and fully sharded data parallelism on the command line: the options
``distml-lab simulate megatron`` and ``distml-lab plan`` take beyond ``t × p × d``, and the
mixture-of-experts presets (:data:`simulator.moe_model.PRESETS`).

    distml-lab simulate megatron --model mixtral-8x7b --tp 2 --pp 2 --dp 16 --ep 8 \\
        --global-batch 256 --micro-batch 1 --cluster h100
    distml-lab plan --model mixtral-8x7b --gpus 64 --cluster h100 --global-batch 256 \\
        --cp 1,2 --fsdp both

Bad input is one line and exit status 2 (:class:`lab.units.UsageError`), before any work.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from lab.units import OUT_OF_RANGE, UsageError, whole

MAX_EXPERTS = 4096
"""Most routed experts taken."""


def moe_arguments(p: argparse.ArgumentParser) -> None:
    """``--experts`` and ``--top-k`` (overriding a MoE preset's)."""
    p.add_argument("--experts", type=whole(1, MAX_EXPERTS),
                   help="routed experts E per MoE layer (overrides the preset's)")
    p.add_argument("--top-k", type=whole(1, MAX_EXPERTS),
                   help="experts each token is routed to (overrides the preset's)")


def grid_arguments(p: argparse.ArgumentParser) -> None:
    """``simulate megatron``'s ``--cp``, ``--ep`` and ``--fsdp``."""
    p.add_argument("--cp", type=whole(1, 65536), default=1,
                   help="context-parallel size: ranks splitting each sequence (default 1)")
    p.add_argument("--ep", type=whole(1, 65536), default=1,
                   help="expert-parallel size, dividing dp·cp (Megatron-Core's folding; "
                        "default 1)")
    p.add_argument("--fsdp", action="store_true",
                   help="shard parameters, gradients and optimizer state over dp·cp (ZeRO-3)")


def sizes(lo: int, hi: int, auto: bool = False) -> Callable[[str], list[int] | None]:
    """An argparse ``type``: up to 16 comma-separated whole numbers from ``lo`` to ``hi``
    (``auto``: also the word ``auto``, read as ``None``); anything else is a one-line usage
    error."""

    def parse(text: str) -> list[int] | None:
        if auto and text == "auto":
            return None
        parts = text.split(",")
        if len(parts) <= 16 and all(re.fullmatch(r"[0-9]{1,6}", v) for v in parts):
            values = [int(v) for v in parts]
            if all(lo <= v <= hi for v in values):
                return values
        raise argparse.ArgumentTypeError(f"{text}{OUT_OF_RANGE}up to 16 whole numbers from "
                                         f"{lo} to {hi}, e.g. 1,2")

    parse.__name__ = "list of sizes"
    parse.bounds = (lo, hi)  # type: ignore[attr-defined]  # for the CLI's property test
    return parse


def plan_grid_arguments(p: argparse.ArgumentParser) -> None:
    """``plan``'s ``--cp``, ``--ep`` and ``--fsdp`` lists."""
    p.add_argument("--cp", type=sizes(1, 65536), default="1",
                   help="context-parallel sizes to try, e.g. 1,2 (default 1)")
    p.add_argument("--ep", type=sizes(1, 65536, auto=True), default="auto",
                   help="expert-parallel sizes to try, e.g. 1,8 (default auto: every power "
                        "of two dividing the experts and dp·cp)")
    p.add_argument("--fsdp", default="off", choices=["off", "on", "both"],
                   help="ZeRO-3 sharding: off, on, or try both (default off)")


def plan_options(args: argparse.Namespace) -> dict[str, Any]:
    """``plan``'s search options for :func:`simulator.megatron_plan.configurations`."""
    return {"cps": args.cp, "eps": args.ep,
            "fsdp": {"off": [False], "on": [True], "both": [False, True]}[args.fsdp]}


def moe_model(args: argparse.Namespace, shape: dict[str, int]) -> Any | None:
    """The :class:`~simulator.moe_model.MoEGPT` ``--model`` names, with ``shape`` and
    ``--experts``/``--top-k`` overriding its own; ``None`` if it names no MoE preset (then
    ``--experts`` and ``--top-k`` are refused)."""
    from dataclasses import replace

    from simulator.moe_model import PRESETS

    if args.model not in PRESETS:
        if args.experts is not None or args.top_k is not None:
            raise UsageError("--experts and --top-k need a mixture-of-experts --model: "
                             f"{', '.join(PRESETS)}")
        return None
    base = PRESETS[args.model]
    changes: dict[str, Any] = {k: v for k, v in shape.items() if v is not None}
    if args.experts is not None:
        changes["experts"] = args.experts
    if args.top_k is not None:
        changes["top_k"] = args.top_k
    try:
        return replace(base, **changes)
    except ValueError as exc:
        raise UsageError(f"invalid model: {exc}") from None
