"""Rank functions of the tensor-parallelism tests: one spawned group per world size runs every
case (:func:`run_all`) and returns, per case, the largest |difference| from the unsharded model
(or the error message of a case that must fail)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from backends import megatron
from backends import tensor_parallel as tp

SMALL = tp.GPTConfig(layers=2, hidden=32, heads=4, vocab=64, seq=16)
"""The chapter's small GPT (t = 1, 2, 4)."""
THIRDS = tp.GPTConfig(layers=2, hidden=36, heads=6, vocab=66, seq=12)
"""A GPT that splits over 3 ranks (6 heads, vocabulary 66, sequence 12)."""
BATCH = 4


def _max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def gpt_case(c: tp.GPTConfig, t: int, sequence_parallel: bool) -> dict[str, float]:
    """Forward logits, loss and every gradient of a ``t × d`` ParallelGPT (``d = world/t``)
    against the unsharded GPT on the whole batch; max |Δ| of each."""
    groups = tp.init_groups(t)
    tg, dg = groups["tensor"], groups["data"]
    d, dp_rank = dist.get_world_size(dg), dist.get_rank(dg)
    torch.manual_seed(1)
    reference = tp.GPT(c)
    tokens, targets = tp.lm_batch(c, BATCH * d, seed=2)
    ref_logits = reference(tokens)
    ref_loss = reference.loss(tokens, targets)
    ref_loss.backward()
    ref_grads = {n: p.grad for n, p in reference.named_parameters()}

    model = tp.ParallelGPT(c, tg, sequence_parallel)
    tp.load_shard(model, reference)
    mine, my_targets = (tp.batch_shard(x, d, dp_rank) for x in (tokens, targets))
    logits = model.full_logits(mine)
    loss = model.loss(mine, my_targets)
    loss.backward()
    tp.finish_gradients(model, tg, dg)
    mean_loss = loss.detach().clone()
    dist.all_reduce(mean_loss, group=dg)
    want = tp.shard_tensors(ref_grads, c, t, dist.get_rank(tg))
    got = {n: p.grad for n, p in model.named_parameters()}
    assert set(got) == set(want), sorted(set(got) ^ set(want))
    return {"logits": float((logits - tp.batch_shard(ref_logits, d, dp_rank)).abs().max().detach()),
            "loss": abs(float(mean_loss) / d - float(ref_loss.detach())),
            "gradients": _max_diff(got, want)}


def grid_case(c: tp.GPTConfig, t: int, p: int, sequence_parallel: bool,
              microbatches: int) -> dict[str, float]:
    """Loss and every gradient of this rank's stage of a ``t × p × d`` grid (the pipeline
    runtime for ``p``, 1F1B over ``microbatches``) against the unsharded GPT on the whole
    batch; max |Δ| of each (the loss on the last stage's ranks only)."""
    grid = megatron.GridRank.create(t, p)
    torch.manual_seed(1)
    reference = tp.GPT(c)
    tokens, targets = tp.lm_batch(c, BATCH * grid.d, seed=2)
    ref_loss = reference.loss(tokens, targets)
    ref_loss.backward()
    ref_grads = {n: q.grad for n, q in reference.named_parameters()}

    trained = megatron.GridGPT(c, grid, microbatches, sequence_parallel)
    tp.load_shard(trained.model, reference)
    mine, my_targets = (tp.batch_shard(x, grid.d, grid.dp_rank) for x in (tokens, targets))
    loss = trained.forward_backward(mine, my_targets)
    want = tp.shard_tensors(ref_grads, c, t, grid.tp_rank)
    owned = {id(q) for q in trained.parameters()}
    got = {n: q.grad for n, q in trained.model.named_parameters() if id(q) in owned}
    assert all(g is not None for g in got.values()), [n for n, g in got.items() if g is None]
    others = [n for n, q in trained.model.named_parameters() if id(q) not in owned]
    assert all(dict(trained.model.named_parameters())[n].grad is None for n in others)
    out = {"gradients": _max_diff(got, {n: want[n] for n in got}),  # type: ignore[arg-type]
           "stage_parameters": float(len(got))}
    lr = 0.1  # one SGD step: the tied copies of the word embedding move together
    trained.train_step(torch.optim.SGD(trained.parameters(), lr=lr), mine, my_targets)
    start = tp.shard_tensors(dict(reference.named_parameters()), c, t, grid.tp_rank)
    stepped = {n: q for n, q in trained.model.named_parameters() if id(q) in owned}
    out["step"] = max(float((q - (start[n] - lr * want[n])).abs().max().detach())
                      for n, q in stepped.items())
    if grid.last:
        assert loss is not None
        mean_loss = torch.tensor(loss)
        dist.all_reduce(mean_loss, group=grid.data)
        out["loss"] = abs(float(mean_loss) / grid.d - float(ref_loss))
    return out


GRIDS = {2: [(1, 2, False, 1), (1, 2, False, 3), (2, 1, False, 2)],
         3: [(1, 3, False, 2), (3, 1, True, 2)],
         4: [(2, 2, False, 2), (2, 2, True, 2), (1, 2, False, 2), (1, 4, False, 4),
             (4, 1, False, 1)]}
"""World → ``(t, p, sequence_parallel, microbatches)`` of the pipeline cases."""


def grid_name(world: int, t: int, p: int, sequence_parallel: bool, microbatches: int) -> str:
    d = world // (t * p)
    return f"t{t}p{p}d{d}m{microbatches}{'-sp' if sequence_parallel else ''}"


def mlp_vs_dtensor(hidden: int = 24) -> dict[str, float]:
    """Our ParallelMLP against ``parallelize_module`` with ColwiseParallel / RowwiseParallel
    on a CPU DeviceMesh: output, input gradient and weight gradients."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    t, rank = dist.get_world_size(), dist.get_rank()
    torch.manual_seed(3)
    reference = nn.Sequential()
    reference.fc1 = nn.Linear(hidden, 4 * hidden)
    reference.act = nn.GELU()
    reference.fc2 = nn.Linear(4 * hidden, hidden)
    x = torch.randn(5, 3, hidden)

    mesh = init_device_mesh("cpu", (t,))
    theirs = parallelize_module(_copy(reference), mesh,
                                {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    x1 = x.clone().requires_grad_()
    y1 = theirs(x1)
    y1.sum().backward()

    ours = tp.ParallelMLP(hidden)
    with torch.no_grad():
        ours.fc1.weight.copy_(reference.fc1.weight.chunk(t, 0)[rank])
        assert ours.fc1.bias is not None and ours.fc2.bias is not None
        ours.fc1.bias.copy_(reference.fc1.bias.chunk(t, 0)[rank])
        ours.fc2.weight.copy_(reference.fc2.weight.chunk(t, 1)[rank])
        ours.fc2.bias.copy_(reference.fc2.bias)
    x2 = x.clone().requires_grad_()
    y2 = ours(x2)
    y2.sum().backward()

    def local(grad: Any) -> torch.Tensor:
        return grad.to_local() if hasattr(grad, "to_local") else grad  # type: ignore[no-any-return]

    def full(p: Any) -> torch.Tensor:
        return p.full_tensor() if hasattr(p, "full_tensor") else p  # type: ignore[no-any-return]

    assert x1.grad is not None and x2.grad is not None
    return {"output": float((full(y1) - y2).abs().max()),
            "input_gradient": float((x1.grad - x2.grad).abs().max()),
            "fc1_gradient": float((local(theirs.fc1.weight.grad) - ours.fc1.weight.grad
                                   ).abs().max()),
            "fc2_gradient": float((local(theirs.fc2.weight.grad) - ours.fc2.weight.grad
                                   ).abs().max()),
            "fc2_bias_gradient": float((full(theirs.fc2.bias.grad) - ours.fc2.bias.grad
                                        ).abs().max())}


def _copy(module: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(module)


def _error(fn: Any, *args: Any) -> str:
    try:
        fn(*args)
    except ValueError as err:
        return str(err)
    return "no error"


def run_all() -> dict[str, Any]:
    """Every case this world size allows."""
    torch.set_default_dtype(torch.float64)
    world = dist.get_world_size()
    config = THIRDS if world % 3 == 0 else SMALL
    out: dict[str, Any] = {"gpt": {}, "errors": {}}
    tensor_sizes = [t for t in range(1, world + 1) if world % t == 0]
    for t in tensor_sizes:
        for sp in (False, True):
            if sp and t == 1:
                continue
            out["gpt"][f"t{t}d{world // t}{'-sp' if sp else ''}"] = gpt_case(config, t, sp)
    out["grid"] = {grid_name(world, *case): grid_case(config, *case)
                   for case in GRIDS.get(world, [])}
    if world > 1:
        out["dtensor"] = mlp_vs_dtensor(24 if world != 3 else 36)
        group = tp.init_groups(world)["tensor"]
        odd = tp.GPTConfig(vocab=SMALL.vocab + 1, heads=world, hidden=12 * world)
        out["errors"]["vocab"] = _error(tp.ParallelGPT, odd, group)
        out["errors"]["heads"] = _error(tp.ParallelGPT,
                                        tp.GPTConfig(heads=world + 1, hidden=12 * (world + 1),
                                                     vocab=64 * world), group)
        out["errors"]["sequence"] = _error(tp.ParallelGPT,
                                           tp.GPTConfig(seq=world * 4 + 1, heads=world,
                                                        hidden=12 * world, vocab=64 * world),
                                           group, True)
    return out
