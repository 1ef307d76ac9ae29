"""Rank programs for the RPC tests: rank 0 drives, the others serve; plain numbers come back."""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
from torch import nn

from backends.rpc import (
    RpcParameterServer,
    SplitModel,
    init_rpc,
    run_trainer,
    shutdown,
    train_split,
    worker_name,
)

WIDTHS = (6, 9, 7, 5, 3)
LR, STEPS = 0.05, 3


def layers(lo: int, hi: int) -> nn.Module:
    """Layers ``lo … hi−1`` of the reference MLP, with the reference's initial weights."""
    full = reference_model()
    return nn.Sequential(*list(full.children())[2 * lo:2 * hi - (1 if hi == n_layers() else 0)])


def n_layers() -> int:
    return len(WIDTHS) - 1


def reference_model() -> nn.Sequential:
    torch.manual_seed(0)
    mods: list[nn.Module] = []
    for a, b in itertools.pairwise(WIDTHS):
        mods += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*mods[:-1])


def batches(seed: int, n: int = STEPS, rows: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(rows, WIDTHS[0], generator=g), torch.randn(rows, WIDTHS[-1], generator=g))
            for _ in range(n)]


def train_reference(data: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> dict[str, Any]:
    """SGD in one process on the mean of each round's losses over ``data``'s sources."""
    model = reference_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(len(data[0])):
        opt.zero_grad()
        for source in data:
            x, y = source[step]
            (nn.functional.mse_loss(model(x), y) / len(data)).backward()
        opt.step()
    return {"params": torch.cat([p.detach().reshape(-1) for p in model.parameters()]),
            "model": model}


def _split_points(stages: int) -> list[tuple[int, int]]:
    cuts = [round(i * n_layers() / stages) for i in range(stages + 1)]
    return list(itertools.pairwise(cuts))


def _flat(state: dict[str, torch.Tensor]) -> torch.Tensor:
    # stage{i}.{index}.{weight|bias}: order by stage, then layer index, weight before bias
    def key(k: str) -> tuple[int, int, int]:
        stage, idx, kind = k.split(".")
        return int(stage[5:]), int(idx), 0 if kind == "weight" else 1
    return torch.cat([state[k].reshape(-1) for k in sorted(state, key=key)])


def drive() -> dict[str, Any]:
    """Rank 0: every check, on workers 1 … world−1 (or on itself when alone)."""
    world = dist.get_world_size()
    workers = list(range(1, world)) or [0]
    out: dict[str, Any] = {}
    data = batches(7)
    ref = train_reference([data])

    stages = min(len(workers), n_layers())
    factories = [partial(layers, lo, hi) for lo, hi in _split_points(stages)]
    model = SplitModel(factories, workers[:stages])
    x = data[0][0]
    out["forward"] = float((model(x) - reference_model()(x)).abs().max())
    out["pipelined"] = float((model.pipelined_forward(x, 3) - model(x)).abs().max())
    train_split(model, data, LR)
    out["split_train"] = float((_flat(model.state()) - ref["params"]).abs().max())

    model = SplitModel(factories, workers[:stages])
    train_split(model, data, LR, microbatches=4)
    out["pipelined_train"] = float((_flat(model.state()) - ref["params"]).abs().max())

    trainer_data = [batches(100 + t) for t in range(len(workers))]
    ps = rpc.RRef(RpcParameterServer(reference_model, len(workers), LR))
    futures = [rpc.rpc_async(worker_name(w), run_trainer, args=(ps, reference_model, d))
               for w, d in zip(workers, trainer_data, strict=True)]
    torch.futures.wait_all(futures)
    got = torch.cat([p.reshape(-1) for p in ps.local_value().parameters()])
    out["parameter_server"] = float((got - train_reference(trainer_data)["params"]).abs().max())
    out["ps_rounds"] = ps.local_value().rounds
    return out


def run_suite() -> dict[str, Any] | None:
    """Every rank: start RPC; rank 0 drives; all shut down together."""
    init_rpc(timeout_s=30)
    try:
        return drive() if dist.get_rank() == 0 else None
    finally:
        shutdown()


def fail_on_worker() -> None:
    """A stage whose construction fails on its worker: the driver must get the error."""
    init_rpc(timeout_s=10)
    try:
        if dist.get_rank() == 0:
            SplitModel([_broken], [dist.get_world_size() - 1]).forward(torch.ones(1, 6))
    finally:
        shutdown()


def _broken() -> nn.Module:
    raise RuntimeError("stage factory failed on purpose")
