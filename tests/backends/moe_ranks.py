"""Rank programs for the expert-parallel tests: one process group per world size runs every
case and returns plain numbers; mismatches fail inside the rank (``assert_close``), which
``spawn`` reports with the rank's traceback."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from backends.moe.exchange import all_to_all_uneven
from backends.moe.measure import AUX_WEIGHT, MoEConfig, build, group_tokens
from backends.moe.parallel import ExpertParallelMoE

EXPERTS = 12
"""A multiple of every world size 1–4."""

CASES = [
    ("k1", MoEConfig(d_model=5, hidden=7, experts=EXPERTS, k=1, capacity_factor=1.25)),
    ("k2-drops", MoEConfig(d_model=5, hidden=7, experts=EXPERTS, k=2, capacity_factor=0.5,
                           seed=1)),
    ("k2-roomy", MoEConfig(d_model=6, hidden=9, experts=EXPERTS, k=2, capacity_factor=3.0,
                           seed=2)),
    ("k1-all-to-expert-0", MoEConfig(d_model=5, hidden=7, experts=EXPERTS, k=1,
                                     capacity_factor=1.0, skew=50.0, seed=3)),
]
"""Name and layer of each parity case: ``k`` 1 and 2, a capacity factor small enough to
drop, and routing so skewed that every token wants expert 0 (every other rank gets none)."""

TOKENS = (7, 13, 7, 13)
"""Tokens in rank ``r``'s group: awkward and unequal."""


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=lambda m: f"{what}: {m}")


def parity(name: str, config: MoEConfig) -> dict[str, Any]:
    """The expert-parallel layer against the one-process layer on every rank's group: output,
    auxiliary loss, the router's and this rank's experts' gradients, the dropped assignments.
    """
    rank, p = dist.get_rank(), dist.get_world_size()
    reference = build(config)
    loss = torch.zeros(())
    groups = [group_tokens(config, s, TOKENS[s]) for s in range(p)]
    outputs = []
    for x, g in groups:
        y, aux = reference(x)
        outputs.append((y, aux))
        loss = loss + (y * g).sum() + AUX_WEIGHT * aux
    loss.backward()

    layer = ExpertParallelMoE(build(config))
    x, g = groups[rank]
    y, aux = layer(x)
    ((y * g).sum() + AUX_WEIGHT * aux).backward()
    layer.reduce_router_grads()

    _close(y, outputs[rank][0].detach(), f"{name}: output")
    _close(aux, outputs[rank][1].detach(), f"{name}: aux loss")
    _close(layer.router.weight.grad, reference.router.weight.grad, f"{name}: router grad")
    for i, expert in enumerate(layer.experts):
        twin = reference.experts[layer.first + i]
        for (pname, mine), theirs in zip(expert.named_parameters(), twin.parameters(),
                                         strict=True):
            assert mine.grad is not None and theirs.grad is not None
            _close(mine.grad, theirs.grad, f"{name}: expert {layer.first + i} {pname}")
    routing = layer.route(x)
    lost = (~routing.kept).all(dim=1)  # tokens with every assignment dropped
    assert torch.equal(routing.kept, reference.route(x).kept)
    assert not y[lost].any() and not outputs[rank][0][lost].any()
    received = sum(int(routing.counts()[e]) for e in range(layer.first,
                                                          layer.first + layer.local))
    return {"dropped": routing.dropped, "own_rows": received}


def uneven_against_builtin(seed: int) -> None:
    """:func:`all_to_all_uneven` equals ``dist.all_to_all_single`` with split sizes, for random
    splits with zeros in them, on rows of 3 and on flat tensors."""
    rank, p = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator().manual_seed(seed)
    splits = torch.randint(0, 4, (p, p), generator=gen)
    splits[0, -1] = 0  # at least one empty piece (itself when p = 1)
    send, recv = splits[rank].tolist(), splits[:, rank].tolist()
    for width in ((3,), ()):
        numel = sum(send) * (width[0] if width else 1)
        data = torch.arange(numel, dtype=torch.float32).view(sum(send), *width) + 1000 * rank
        ours = data.new_empty((sum(recv), *width))
        theirs = torch.empty_like(ours)
        all_to_all_uneven(ours, data, recv, send)
        dist.all_to_all_single(theirs, data, recv, send)
        assert torch.equal(ours, theirs), (rank, send, recv)


def run_all() -> dict[str, Any]:
    """Every case in this process group."""
    for seed in range(3):
        uneven_against_builtin(seed)
    out: dict[str, Any] = {name: parity(name, config) for name, config in CASES}
    try:  # 4 experts cannot be sharded over 3 ranks
        ExpertParallelMoE(build(MoEConfig(experts=4)))
    except ValueError as err:
        out["refused"] = str(err)
    return out
