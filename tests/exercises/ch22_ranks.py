"""Rank program for grading exercise 22.2 on real processes: the splits of the lab's
expert-parallel dispatch, recorded in its uneven all-to-all as it runs, beside the exercise's
answer."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

import backends.moe.exchange as exchange
from backends.moe.measure import MoEConfig, build, group_tokens
from backends.moe.parallel import ExpertParallelMoE
from exercises import load


def dispatch(config: MoEConfig, tokens: int) -> dict[str, Any]:
    """One forward of :class:`ExpertParallelMoE` on this rank's group; the (input, output)
    splits of its dispatch, and ``dispatch_splits`` of the routing table of every rank."""
    rank, world = dist.get_rank(), dist.get_world_size()
    layer = ExpertParallelMoE(build(config))
    x = group_tokens(config, rank, tokens + 3 * rank)[0]  # groups of unequal sizes
    seen: list[tuple[list[int], list[int]]] = []
    real = exchange.all_to_all_uneven

    def recording(output: torch.Tensor, input: torch.Tensor, output_splits: list[int],
                  input_splits: list[int], group: Any = None, tracer: Any = None) -> None:
        seen.append((list(input_splits), list(output_splits)))
        real(output, input, output_splits, input_splits, group, tracer)

    exchange.all_to_all_uneven = recording  # the first exchange of a forward: the dispatch
    try:
        with torch.no_grad():
            layer(x)
            row = [int(n) for n in layer.route(x).counts()]
    finally:
        exchange.all_to_all_uneven = real
    table: list[list[int]] = [[] for _ in range(world)]
    dist.all_gather_object(table, row)
    try:
        send, recv = load("ch22_dispatch_splits").dispatch_splits(table, rank)
    except NotImplementedError as exc:
        raise RuntimeError(f"dispatch_splits is not implemented yet: {exc}") from None
    return {"real": seen[0], "yours": (list(send), list(recv)), "table": table}
