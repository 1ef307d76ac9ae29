"""Rank side of the DDP parity tests: each case trains one model twice, with our
``backends.ddp.DistributedDataParallel`` and with PyTorch's, and compares the parameters.

One launch of :data:`WORLD` ranks runs every case; worlds 1 … WORLD−1 run on the first ranks
through a ``dist.new_group``, world WORLD on the default group.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.join import Join as TorchJoin
from torch.nn.parallel import DistributedDataParallel as TorchDDP

from backends.ddp import DistributedDataParallel
from backends.ddp_join import Join
from backends.trace import Tracer

WORLD = 4
FEATURES = ("plain", "default_caps", "frozen", "tied", "unused", "no_sync", "join", "traced",
            "buffers")


@dataclass(frozen=True)
class Case:
    """One parity run: a model feature at one world size, ``steps`` optimizer steps."""

    feature: str
    world: int
    seed: int
    steps: int = 3
    bucket_cap_mb: float | None = 0.0005  # ≈ 524 bytes: several buckets for tiny models

    def __str__(self) -> str:
        return f"{self.feature}(world={self.world}, seed={self.seed})"


class Net(nn.Module):
    """A small MLP with optional frozen, tied and unused parts."""

    def __init__(self, feature: str) -> None:
        super().__init__()
        self.feature = feature
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 8)
        if feature == "frozen":
            self.fc1.requires_grad_(False)
        if feature == "tied":
            self.fc4 = nn.Linear(8, 8)
            self.fc5 = nn.Linear(8, 8)
            self.fc5.weight = self.fc4.weight  # one Parameter, registered once
        if feature == "unused":
            self.sometimes = nn.Linear(8, 8)  # used on even ranks only
            self.never = nn.Linear(8, 8)  # used on no rank
        if feature == "buffers":
            self.bn = nn.BatchNorm1d(8)  # running statistics: buffers, broadcast every forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))
        if self.feature == "tied":
            y = self.fc5(torch.tanh(self.fc4(y)))
        if self.feature == "unused" and dist.get_rank() % 2 == 0:
            y = y + self.sometimes(y)
        if self.feature == "buffers":
            y = self.bn(y)
        return y


def batches(case: Case, rank: int, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """This rank's inputs and targets (different on every rank)."""
    gen = torch.Generator().manual_seed(case.seed * 100 + rank)
    return [(torch.randn(5, 8, generator=gen), torch.randn(5, 8, generator=gen))
            for _ in range(count)]


def train(model: nn.Module, case: Case, data: list[tuple[torch.Tensor, torch.Tensor]],
          join: type | None) -> None:
    """``case.steps`` SGD steps (momentum, so a wrong gradient is remembered)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if case.feature == "no_sync":  # two accumulated micro-batches, then a synced one
        for step in range(case.steps):
            opt.zero_grad()
            with model.no_sync():  # type: ignore[operator]
                for x, y in data[3 * step:3 * step + 2]:
                    nn.functional.mse_loss(model(x), y).backward()
            x, y = data[3 * step + 2]
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        return
    if join is not None:
        with join([model]):
            for x, y in data:
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
        return
    for x, y in data[:case.steps]:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def check(case: Case, group: dist.ProcessGroup | None, team_rank: int) -> None:
    """Train ours and PyTorch's DDP from one (rank-dependent) initial model; compare."""
    rank = dist.get_rank()
    torch.manual_seed(case.seed * 100 + rank)  # different on every rank: broadcast fixes it
    base = Net(case.feature)
    count = case.steps * 3 if case.feature == "no_sync" else case.steps
    if case.feature == "join":
        count = 2 + team_rank  # uneven: rank r has 2 + r batches
    data = batches(case, rank, count)
    tracer = Tracer() if case.feature == "traced" else None
    find_unused = case.feature == "unused"
    ours = DistributedDataParallel(copy.deepcopy(base), group, case.bucket_cap_mb,
                                   find_unused_parameters=find_unused, tracer=tracer)
    theirs = TorchDDP(copy.deepcopy(base), process_group=group,
                      bucket_cap_mb=case.bucket_cap_mb, find_unused_parameters=find_unused)
    join = case.feature == "join"
    train(ours, case, data, Join if join else None)
    train(theirs, case, data, TorchJoin if join else None)
    ours_state, theirs_state = ours.module.state_dict(), theirs.module.state_dict()
    for name, a in ours_state.items():  # parameters and buffers
        b = theirs_state[name]
        if not torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-6):
            worst = float((a - b).abs().max())
            raise AssertionError(f"parameter {name} differs from PyTorch DDP's by {worst:.3g}")
    if tracer is not None:
        check_trace(tracer, ours, case)


def check_trace(tracer: Tracer, model: DistributedDataParallel, case: Case) -> None:
    """Every step all-reduced every bucket once, launched in bucket order, after it was ready."""
    buckets = len(model.reducer.buckets)
    reduces = [s for s in tracer.trace if s.kind == "allreduce"]
    ready = [s for s in tracer.trace if s.kind == "ready"]
    assert buckets > 1, f"expected several buckets, got {buckets}"
    assert len(reduces) == len(ready) == buckets * case.steps, (
        f"{len(reduces)} all-reduce and {len(ready)} ready spans for {buckets} buckets × "
        f"{case.steps} steps")
    starts = [int(s.name.split()[-1]) for s in sorted(reduces, key=lambda s: s.start)]
    assert starts == list(range(buckets)) * case.steps, f"launch order {starts}"
    ends = {s.name.split()[1]: s.end for s in ready[-buckets:]}
    for s in reduces[-buckets:]:
        assert s.start >= ends[s.name.split()[-1]] - 1e-6, f"{s.name} launched before ready"


def run_cases(cases: list[Case]) -> list[str]:
    """Rank function: every case this rank takes part in; returns failure messages."""
    rank = dist.get_rank()
    groups = {w: dist.new_group(list(range(w))) for w in range(1, WORLD)}
    failures = []
    for case in cases:
        if rank >= case.world:
            continue
        try:
            check(case, groups.get(case.world), rank)
        except Exception as exc:
            failures.append(f"{case} on rank {rank}: {type(exc).__name__}: {exc}")
    return failures
