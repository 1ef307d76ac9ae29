"""Profiling a rank's step on ONE process — a primitive of the lab's Megatron prediction: every
collective replaced by a local stand-in (:class:`backends.tensor_parallel.ProfileGroup`), the
seconds of compute between consecutive collectives recorded with each collective's kind, group
and bytes — a t × d step (:func:`profile_ops`) or each pipeline stage's pieces
(:func:`profile_stages`), each piece timed as :class:`Conditions` says."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from backends import tensor_parallel as tp
from backends.tensor_parallel.point import GridPoint, Op, _batch, _compute, _model


@dataclass(frozen=True)
class Conditions:
    """How a profile times each piece of compute between collectives.

    * ``wait``: a blocking wait (:func:`~backends.tensor_parallel.measure.wait_step`) run
      before each timed run and inside every stand-in collective, so each piece is timed
      right after the thread slept, as in a real step (``None``: back to back, a warm loop);
    * ``slowest``: given one run's pieces (s), each piece's largest time over the copies
      profiling at once (:func:`~backends.tensor_parallel.measure.profile_together_rank`) —
      a collective waits for the slowest rank's piece, not a typical one;
    * ``statistic``: ``median`` or ``mean`` over the repeats (a chain of pieces costs the
      sum of their means).
    """

    wait: Any = None
    slowest: Any = None
    statistic: str = "median"


def _one_run(log: list[tuple[Any, ...]], run: Any, setup: Any, cond: Conditions) -> list[Op]:
    """One timed ``run(setup())``: the compute seconds between the collectives it logs in
    ``log`` (a :class:`~backends.tensor_parallel.ProfileGroup`'s), and those collectives."""
    arg = setup() if setup is not None else None
    log.clear()
    if cond.wait is not None:
        cond.wait()
    start = time.perf_counter()
    run(arg)
    end = time.perf_counter()
    ops: list[Op] = []
    last = start
    for kind, group, nbytes, entered, left in log:
        ops.append(("compute", "", entered - last))
        ops.append((kind, group, float(nbytes)))
        last = left
    ops.append(("compute", "", end - last))
    if cond.slowest is not None:
        pieces = iter(cond.slowest([v for k, _, v in ops if k == "compute"]))
        ops = [(k, g, next(pieces)) if k == "compute" else (k, g, v) for k, g, v in ops]
    return ops


def _summary(runs: list[list[Op]], statistic: str) -> list[Op]:
    """Each piece of compute's ``statistic`` (median, mean) over ``runs``, s."""
    shape = [(k, g, b) if k != "compute" else (k, g, 0.0) for k, g, b in runs[0]]
    for ops in runs:
        if [(k, g, b) if k != "compute" else (k, g, 0.0) for k, g, b in ops] != shape:
            raise RuntimeError("the step's collectives changed between repeats")
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic must be median or mean, got {statistic!r}")

    def stat(values: list[float]) -> float:
        return statistics.median(values) if statistic == "median" else statistics.fmean(values)

    return [(k, g, stat([r[j][2] for r in runs])) if k == "compute" else (k, g, b)
            for j, (k, g, b) in enumerate(runs[0])]


class Sampler:
    """Times a point's profile one sample at a time (every piece once per :meth:`sample`),
    so its samples can be interleaved with other measurements
    (:func:`~backends.tensor_parallel.measure.measure_rank`); :meth:`result` summarizes them
    (:func:`profile_ops`, :func:`profile_stages`)."""

    def __init__(self, log: list[tuple[Any, ...]], pieces: list[tuple[Any, Any]],
                 assemble: Any, conditions: Conditions) -> None:
        self.log, self.pieces, self.assemble, self.conditions = log, pieces, assemble, conditions
        self.runs: list[list[list[Op]]] = [[] for _ in pieces]

    def sample(self) -> None:
        """Time every piece once."""
        for (run, setup), out in zip(self.pieces, self.runs, strict=True):
            out.append(_one_run(self.log, run, setup, self.conditions))

    def result(self, skip: int = 0) -> Any:
        """The profile from the samples after the first ``skip`` (warm-up)."""
        if len(self.runs[0]) <= skip:
            raise ValueError(f"{len(self.runs[0])} samples, {skip} of them warm-up")
        return self.assemble([_summary(r[skip:], self.conditions.statistic)
                              for r in self.runs])


def sampler(point: GridPoint, conditions: Conditions | None = None) -> Sampler:
    """The :class:`Sampler` of ``point``'s profile: a ``t × d`` step (:func:`profile_ops`)
    or every pipeline stage's pieces (:func:`profile_stages`)."""
    cond = conditions or Conditions()
    log: list[tuple[Any, ...]] = []
    if point.p > 1:
        pieces, assemble = _stage_pieces(point, log, cond)
        return Sampler(log, pieces, assemble, cond)
    tensor = tp.ProfileGroup(point.t, 0, "tensor", log, cond.wait)
    data = tp.ProfileGroup(point.d, 0, "data", log, cond.wait)
    model, opt = _model(point, tensor)
    tokens, targets = _batch(point, 0)
    return Sampler(log, [(lambda _: tp.train_step(model, opt, tokens, targets, data), None)],
                   lambda summaries: summaries[0], cond)


def _profiled(point: GridPoint, repeats: int, warmup: int,
              conditions: Conditions | None) -> Any:
    timed = sampler(point, conditions)
    for _ in range(warmup + repeats):
        timed.sample()
    return timed.result(warmup)


def profile_ops(point: GridPoint, repeats: int = 30, warmup: int = 5,
                conditions: Conditions | None = None) -> list[Op]:
    """One rank's step on ONE process (collectives stood in): median compute seconds
    between collectives, and the collectives (see the module docstring). ``p = 1`` only
    (:func:`profile_stages` for a pipeline). ``conditions``: how each piece is timed
    (:class:`Conditions`; default: back to back, median)."""
    if point.p != 1:
        raise ValueError("profile_ops profiles t × d grids; use profile_stages for p > 1")
    return _profiled(point, repeats, warmup, conditions)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class StageProfile:
    """One pipeline stage of a ``t × p × d`` point, profiled on ONE process: the ops of one
    micro-batch's forward (with the loss on the last stage) and backward, the bytes of the
    activation it sends on (0 on the last stage), and what follows the flush (gradient
    all-reduces on the tensor, data and embedding groups, the optimizer step)."""

    forward: list[Op]
    backward: list[Op]
    activation_bytes: int
    finish: list[Op]


def profile_stages(point: GridPoint, repeats: int = 30, warmup: int = 5,
                   conditions: Conditions | None = None) -> list[StageProfile]:
    """Each stage of :class:`backends.megatron.GridGPT` on ONE process (tensor collectives
    stood in by a :class:`~backends.tensor_parallel.ProfileGroup`), one micro-batch;
    ``conditions`` as in :func:`profile_ops` (with a wait, each forward, backward and
    optimizer step is timed right after one, as each follows a receive or a collective in
    the real step)."""
    if point.p == 1:
        raise ValueError("profile_stages profiles t × p × d grids with p > 1; use profile_ops")
    return _profiled(point, repeats, warmup, conditions)  # type: ignore[no-any-return]


def _stage_pieces(point: GridPoint, log: list[tuple[Any, ...]], cond: Conditions
                  ) -> tuple[list[tuple[Any, Any]], Any]:
    """Every stage's forward, backward and optimizer step as ``(run, setup)`` pieces, and
    the function that assembles their summaries into :class:`StageProfile` s."""
    from backends import megatron
    from backends.pipeline.partition import partition

    tensor = tp.ProfileGroup(point.t, 0, "tensor", log, cond.wait)
    model, _ = _model(point, tensor)
    layers = megatron.stages(model)
    parts = partition(layers, megatron.even_balance(len(layers), point.p))
    local = point.global_batch // point.d
    if local % point.microbatches:
        raise ValueError(f"{local} sequences per replica do not split into "
                         f"{point.microbatches} micro-batches")
    tokens, targets = tp.lm_batch(point.config, local // point.microbatches, seed=1)
    pieces: list[tuple[Any, Any]] = []
    shapes: list[tuple[int, list[Op]]] = []
    x: torch.Tensor = tokens
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        inp = x if k == 0 else x.detach().requires_grad_()

        def forward(_: Any = None, part: Any = part, inp: torch.Tensor = inp,
                    last: bool = last) -> torch.Tensor:
            y = part(inp)
            if last:
                y = tp.vocab_parallel_cross_entropy(y, targets.t(), tensor).mean()
            return y  # type: ignore[no-any-return]

        y = forward()
        grad = None if last else torch.ones_like(y)
        params = list(part.parameters())
        opt = torch.optim.SGD(params, lr=0.01)
        for q in params:
            q.grad = torch.zeros_like(q)
        pieces += [(forward, None),
                   (lambda y, grad=grad: torch.autograd.backward(y, grad), forward),
                   (lambda _, opt=opt, params=params: opt.step(), None)]
        finish: list[Op] = []
        partial = sum(q.numel() for q in params if getattr(q, "sequence_parallel", False))
        if partial and point.t > 1:
            finish.append(("all_reduce", "tensor", 4.0 * partial))
        if point.d > 1:
            finish.append(("all_reduce", "data", 4.0 * sum(q.numel() for q in params)))
        if point.p > 1 and (k == 0 or last):
            finish.append(("all_reduce", "embedding", 4.0 * model.wte.weight.numel()))
        shapes.append((0 if last else 4 * y.numel(), finish))
        x = y.detach()

    def assemble(summaries: list[list[Op]]) -> list[StageProfile]:
        out = []
        for k, (activation_bytes, finish) in enumerate(shapes):
            fwd, bwd, step = summaries[3 * k:3 * k + 3]
            # the optimizer steps after the reductions
            out.append(StageProfile(fwd, bwd, activation_bytes,
                                    [*finish, ("compute", "", _compute(step))]))
        return out

    return pieces, assemble
