"""Rank functions of the pipeline tests (module level, so spawn can pickle them by name).

One launch of 4 ranks runs every distributed case; a case with ``p < 4`` stages runs on the
sub-group of ranks ``0 … p−1`` and the other ranks skip it. Each case returns plain numbers
(maximum differences, counts) and the test module asserts on them in the parent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.func import functional_call

WIDTH, HIDDEN, LAYERS = 6, 10, 6
BALANCES = {1: [6], 2: [3, 3], 3: [2, 1, 3], 4: [1, 2, 2, 1]}
"""Uneven on purpose: stages of different lengths."""


@dataclass(frozen=True)
class SyncCase:
    """A synchronous pipeline step checked against single-process training."""

    stages: int
    schedule: str
    checkpoint: str
    microbatches: int
    batch: int
    chunks: int = 1

    def __str__(self) -> str:
        return (f"{self.schedule}(p={self.stages}, m={self.microbatches}, batch={self.batch}, "
                f"checkpoint={self.checkpoint}, chunks={self.chunks})")


@dataclass(frozen=True)
class BuiltinCase:
    """Our runtime against ``torch.distributed.pipelining`` on the same split."""

    stages: int
    schedule: str
    microbatches: int
    batch: int

    def __str__(self) -> str:
        return (f"builtin {self.schedule}(p={self.stages}, m={self.microbatches}, "
                f"batch={self.batch})")


@dataclass(frozen=True)
class PipeDreamCase:
    """Asynchronous PipeDream against a one-process replay of its weight versions."""

    stages: int
    minibatches: int
    vertical_sync: bool

    def __str__(self) -> str:
        return f"pipedream(p={self.stages}, n={self.minibatches}, vsync={self.vertical_sync})"


def _model(seed: int = 3) -> torch.nn.Sequential:
    from backends.pipeline.models import mlp

    return mlp(LAYERS, WIDTH, HIDDEN, seed=seed)


def _data(batch: int, seed: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, WIDTH, generator=gen), torch.randn(batch, WIDTH, generator=gen)


def _balance(case: SyncCase) -> list[int]:
    if case.chunks == 1:
        return BALANCES[case.stages]
    stages = case.stages * case.chunks
    base = [LAYERS // stages] * stages
    base[-1] += LAYERS - sum(base)
    return base


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((float((x - y).abs().max()) for x, y in zip(a, b, strict=True)), default=0.0)


def run_sync(case: SyncCase, group: Any) -> dict[str, Any]:
    """Our pipeline vs single-process training: loss, gradients, memory vs the simulator."""
    from backends.pipeline.runtime import Pipeline

    model, reference = _model(), _model()
    x, t = _data(case.batch)
    pipe = Pipeline(model, _balance(case), case.microbatches, case.schedule, case.chunks,
                    case.checkpoint, group=group)
    loss = None
    for _ in range(2):  # two steps: the second reuses the agreed buffers
        model.zero_grad(set_to_none=True)
        loss = pipe.step(x if 0 in pipe.modules else None,
                         t if pipe.last in pipe.modules else None)
    ref_loss = torch.nn.functional.mse_loss(reference(x), t)
    ref_loss.backward()
    mine = {id(p) for p in pipe.parameters()}
    ours = [p.grad for p in model.parameters() if id(p) in mine]
    theirs = [q.grad for p, q in zip(model.parameters(), reference.parameters(), strict=True)
              if id(p) in mine]
    scale = max(float(g.abs().max()) for g in theirs)
    return {"grad_diff": _max_diff(ours, theirs) / scale, "params": len(ours),
            "loss_diff": None if loss is None else abs(loss - float(ref_loss)),
            "peak": pipe.peak_activation_bytes}


def run_builtin(case: BuiltinCase, group: Any) -> dict[str, Any]:
    """Our pipeline and ``torch.distributed.pipelining`` on the same split: same numbers."""
    from backends.pipeline.builtin import BuiltinPipeline
    from backends.pipeline.partition import partition
    from backends.pipeline.runtime import Pipeline

    balance = BALANCES[case.stages]
    ours_model, their_model = _model(), _model()
    x, t = _data(case.batch)
    rank = dist.get_rank(group)
    first, last = rank == 0, rank == case.stages - 1
    pipe = Pipeline(ours_model, balance, case.microbatches, case.schedule, checkpoint="never",
                    group=group)
    ours_loss = pipe.step(x if first else None, t if last else None)
    builtin = BuiltinPipeline(partition(their_model, balance)[rank], rank, case.stages,
                              case.microbatches, case.schedule, group=group)
    their_loss = builtin.step(x if first else None, t if last else None)
    ours = [p.grad for p in pipe.parameters()]
    theirs = [p.grad for p in builtin.module.parameters()]
    return {"grad_diff": _max_diff(ours, theirs),
            "loss_diff": None if ours_loss is None or their_loss is None
            else abs(ours_loss - their_loss)}


def replay_pipedream(case: PipeDreamCase, xs: list[torch.Tensor], ts: list[torch.Tensor],
                     lr: float) -> tuple[list[float], list[dict[str, torch.Tensor]]]:
    """One process: micro-batch ``i`` runs stage ``s`` on weight version ``version[s][i]`` and
    every stage then takes an SGD step with that gradient, in micro-batch order."""
    from backends.pipeline.partition import partition
    from simulator.pipeline.schedules import pipedream_async

    version = pipedream_async(case.stages, case.minibatches,
                              vertical_sync=case.vertical_sync).version
    stages = partition(_model(), BALANCES[case.stages])
    history = [[{n: p.detach().clone() for n, p in s.named_parameters()}] for s in stages]
    losses = []
    for i in range(case.minibatches):
        used = [{n: w.detach().requires_grad_() for n, w in history[s][version[s][i]].items()}
                for s in range(case.stages)]
        h = xs[i]
        for s, module in enumerate(stages):
            h = functional_call(module, used[s], (h,))
        loss = torch.nn.functional.mse_loss(h, ts[i])
        loss.backward()
        losses.append(float(loss))
        for s in range(case.stages):
            history[s].append({n: history[s][-1][n] - lr * used[s][n].grad for n in used[s]})
    return losses, [h[-1] for h in history]


def run_pipedream(case: PipeDreamCase, group: Any) -> dict[str, Any]:
    """The asynchronous runtime's final weights and losses vs :func:`replay_pipedream`."""
    from backends.pipeline.pipedream import PipeDream

    lr = 0.05
    data = [_data(4, seed=100 + i) for i in range(case.minibatches)]
    xs, ts = [d[0] for d in data], [d[1] for d in data]
    rank = dist.get_rank(group)
    runtime = PipeDream(_model(), BALANCES[case.stages], case.minibatches, lr,
                        case.vertical_sync, group=group)
    losses = runtime.train(xs if rank == 0 else None, ts if rank == case.stages - 1 else None)
    ref_losses, ref_weights = replay_pipedream(case, xs, ts, lr)
    weights = dict(runtime.module.named_parameters())
    return {"weight_diff": max(float((weights[n].detach() - w).abs().max())
                               for n, w in ref_weights[rank].items()),
            "loss_diff": max((abs(a - b) for a, b in zip(losses, ref_losses, strict=True)),
                             default=0.0) if losses else None,
            "versions": runtime.max_versions, "planned_versions": runtime.planned_versions}


def run_all(cases: list[Any]) -> list[dict[str, Any] | None]:
    """Every case in one launch; a case's result comes from each of its ranks (``None`` from
    ranks outside it)."""
    world = dist.get_world_size()
    groups = {p: (None if p == world else dist.new_group(list(range(p))))
              for p in range(2, world + 1)}
    out: list[dict[str, Any] | None] = []
    for case in cases:
        if dist.get_rank() >= case.stages:
            out.append(None)
            continue
        group = groups[case.stages]
        fn = {SyncCase: run_sync, BuiltinCase: run_builtin, PipeDreamCase: run_pipedream}
        out.append(fn[type(case)](case, group))
    return out


def failing_stage() -> None:
    """Stage 1 of 2 raises in its forward; the launcher must name rank 1, quickly."""
    from backends.pipeline.runtime import Pipeline

    class Broken(torch.nn.Module):
        calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            if dist.get_rank() == 1 and self.calls > 2:  # after the two dry runs of setup
                raise ValueError("this layer is broken")
            return x

    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), Broken())
    x, t = _data(4)
    pipe = Pipeline(model, [1, 1], 2, "1f1b")
    pipe.step(x if dist.get_rank() == 0 else None, t if dist.get_rank() == 1 else None)
