"""Rank side of the Horovod tests: one launch of :data:`WORLD` ranks runs every case.

Horovod's worlds 1 … WORLD are made with ``hvd.init(comm=range(w))`` on the first ``w`` ranks
(re-initialised for each setting); PyTorch's own results, for comparison, come from a
``torch.distributed`` group over the same ranks. Each case's failures are returned, keyed by
feature, so the parent reports them per test.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as TorchDDP

import backends.horovod as hvd
from backends.ddp import DistributedDataParallel
from lab.models import mlp

WORLD = 4
DTYPES = (torch.float32, torch.float64, torch.int64)
SHAPES = ((), (0,), (1,), (7,), (3, 4), (2, 3, 5))
QUICK = {"stall_check_time_s": 2.0, "stall_shutdown_time_s": 8.0}
"""Stall times for cases that should never stall: a bug fails in seconds, not minutes."""


def _data(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    return torch.randint(-1000, 1000, shape, generator=gen, dtype=dtype)


def _reference(t: torch.Tensor, op: str, group: Any, w: int) -> torch.Tensor:
    """PyTorch's all-reduce of ``t`` (SUM), divided for Average as Horovod does."""
    ref = t.clone()
    if ref.numel():
        dist.all_reduce(ref, group=group)
    if op == "Average":
        ref = ref / w if ref.is_floating_point() else torch.div(ref, w, rounding_mode="floor")
    return ref


def _same(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, \
        f"{what}: got {a.dtype} {tuple(a.shape)}, expected {b.dtype} {tuple(b.shape)}"
    if a.is_floating_point():
        ok = torch.allclose(a, b, rtol=1e-5 if a.dtype == torch.float32 else 1e-12, atol=1e-6)
    else:
        ok = torch.equal(a, b)
    assert ok, f"{what}: differs from torch.distributed by {float((a - b).abs().max()):.3g}"


# -- cases --------------------------------------------------------------------------------------

def case_allreduce(w: int, group: Any) -> None:
    """Every dtype, op and shape, blocking and asynchronous, equals dist.all_reduce."""
    rank = dist.get_rank()
    hvd.init(list(range(w)), cycle_time_ms=1, **QUICK)
    try:
        assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (rank, w, rank, w)
        cases = [(d, s, op) for d in DTYPES for s in SHAPES for op in ("Sum", "Average")]
        for i, (dtype, shape, op) in enumerate(cases):  # blocking, one at a time
            x = _data(shape, dtype, 1000 * i + rank)
            got = hvd.allreduce(x, name=f"b{i}", op=getattr(hvd, op))
            _same(got, _reference(x, op, group, w), f"allreduce {dtype} {shape} {op}")
        inputs = [_data(s, d, 7 * i + rank) for i, (d, s, _) in enumerate(cases)]
        handles = [hvd.allreduce_async(x, name=f"a{i}", op=getattr(hvd, op))
                   for i, (x, (_, _, op)) in enumerate(zip(inputs, cases, strict=True))]
        for i, (h, x, (dtype, shape, op)) in enumerate(zip(handles, inputs, cases, strict=True)):
            got = hvd.synchronize(h)
            _same(got, _reference(x, op, group, w), f"allreduce_async {dtype} {shape} {op}")
            assert torch.equal(x, _data(shape, dtype, 7 * i + rank)), "input was modified"
        y = _data((5, 3), torch.float32, rank)
        ref = _reference(y, "Average", group, w)
        assert hvd.allreduce_(y, name="inplace") is y
        _same(y, ref, "allreduce_ in place")
        unnamed = hvd.allreduce(torch.ones(3) * (rank + 1), op=hvd.Sum)  # allreduce.noname.0
        _same(unnamed, torch.full((3,), w * (w + 1) / 2), "unnamed allreduce")
    finally:
        hvd.shutdown()


def case_fusion(w: int, group: Any) -> None:
    """Many tensors in one cycle: fused up to the threshold, one all-reduce each at 0, and
    never two dtypes in one buffer."""
    rank = dist.get_rank()
    n = 20
    for threshold in (1 << 20, 0, 700):
        hvd.init(list(range(w)), cycle_time_ms=25, fusion_threshold_bytes=threshold, **QUICK)
        try:
            hvd.reset_stats()
            xs = [_data((25,), torch.float32, 31 * i + rank) for i in range(n)]
            hs = [hvd.allreduce_async(x, name=f"f{i}", op=hvd.Sum) for i, x in enumerate(xs)]
            for i, (h, x) in enumerate(zip(hs, xs, strict=True)):
                _same(hvd.synchronize(h), _reference(x, "Sum", group, w), f"fused tensor {i}")
            st = hvd.stats()
            effective = st["fusion_threshold_bytes"]
            assert st["tensors_allreduced"] == n, st
            if threshold == 0:
                assert effective == 0 and st["allreduces"] == n, \
                    f"threshold 0: {st['allreduces']} all-reduces for {n} tensors"
            else:
                assert st["allreduces"] < n, \
                    f"threshold {effective}: {st['allreduces']} all-reduces for {n} tensors"
                for nbytes, (_, _, names) in zip(st["allreduce_bytes"], st["fused"],
                                                 strict=True):
                    assert nbytes <= effective or len(names) == 1, (nbytes, effective, names)
            if threshold == 1 << 20:  # interleaved dtypes
                hvd.reset_stats()
                dtypes = [torch.float32, torch.float64] * 6
                ys = [_data((9,), d, 5 * i + rank) for i, d in enumerate(dtypes)]
                hs = [hvd.allreduce_async(y, name=f"m{i}.{str(d)[6:]}", op=hvd.Average)
                      for i, (y, d) in enumerate(zip(ys, dtypes, strict=True))]
                for i, (h, y) in enumerate(zip(hs, ys, strict=True)):
                    _same(hvd.synchronize(h), _reference(y, "Average", group, w), f"mixed {i}")
                st = hvd.stats()
                assert st["tensors_allreduced"] == len(dtypes), st
                for _, dtype, names in st["fused"]:
                    kinds = {name.rsplit(".", 1)[1] for name in names}
                    assert kinds == {dtype}, f"one all-reduce mixed dtypes: {names} as {dtype}"
                assert max(len(names) for _, _, names in st["fused"]) > 1, \
                    f"no fusion among interleaved dtypes: {st['fused']}"
        finally:
            hvd.shutdown()


def case_cache(w: int, group: Any) -> None:
    """A repeated step is agreed through the response cache, without rank 0."""
    rank = dist.get_rank()
    hvd.init(list(range(w)), cycle_time_ms=2, **QUICK)
    try:
        names = [f"c{i}" for i in range(8)]

        def step(shape: tuple[int, ...]) -> None:
            xs = [_data(shape, torch.float32, i + 10 * rank) for i in range(len(names))]
            hs = [hvd.allreduce_async(x, name=n) for x, n in zip(xs, names, strict=True)]
            for h, x in zip(hs, xs, strict=True):
                _same(hvd.synchronize(h), _reference(x, "Average", group, w), "cached step")

        step((4,))
        first = hvd.stats()
        assert first["coordinator_rounds"] >= 1, first
        step((4,))
        second = hvd.stats()
        assert second["coordinator_rounds"] == first["coordinator_rounds"], \
            f"a repeated step went through rank 0: {first} -> {second}"
        assert second["cache_hits"] - first["cache_hits"] == len(names), (first, second)
        step((2, 3))  # same names, new shape: invalid entries, renegotiated
        third = hvd.stats()
        assert third["coordinator_rounds"] > second["coordinator_rounds"], (second, third)
    finally:
        hvd.shutdown()


def _train_horovod(model: nn.Module, data: list[tuple[torch.Tensor, torch.Tensor]],
                   bpps: int) -> None:
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=bpps)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for k in range(0, len(data), bpps):
        opt.zero_grad()
        for x, y in data[k:k + bpps]:
            nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def _train_ddp(model: nn.Module, data: list[tuple[torch.Tensor, torch.Tensor]],
               bpps: int) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for k in range(0, len(data), bpps):
        opt.zero_grad()
        batch = data[k:k + bpps]
        with model.no_sync():  # type: ignore[operator]
            for x, y in batch[:-1]:
                nn.functional.mse_loss(model(x), y).backward()
        x, y = batch[-1]
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def case_parity(w: int, group: Any) -> None:
    """An MLP trained with DistributedOptimizer equals our DDP's and PyTorch DDP's."""
    rank = dist.get_rank()
    for bpps in (1, 2):
        for threshold in (0, 600, 64 << 20):
            base = mlp([8, 16, 16, 4], seed=100 + rank)  # different per rank: broadcast fixes
            gen = torch.Generator().manual_seed(17 * rank + bpps)
            data = [(torch.randn(5, 8, generator=gen), torch.randn(5, 4, generator=gen))
                    for _ in range(3 * bpps)]
            hvd.init(list(range(w)), cycle_time_ms=1, fusion_threshold_bytes=threshold, **QUICK)
            try:
                ours = copy.deepcopy(base)
                _train_horovod(ours, data, bpps)
            finally:
                hvd.shutdown()
            ddp = DistributedDataParallel(copy.deepcopy(base), group, bucket_cap_mb=0.0005)
            _train_ddp(ddp, data, bpps)
            torch_ddp = TorchDDP(copy.deepcopy(base), process_group=group, bucket_cap_mb=0.0005)
            _train_ddp(torch_ddp, data, bpps)
            for other, label in ((ddp.module, "backends.ddp"), (torch_ddp.module, "torch DDP")):
                for (name, a), b in zip(ours.state_dict().items(),
                                        other.state_dict().values(), strict=True):
                    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (
                        f"bpps={bpps} threshold={threshold}: {name} differs from {label}'s by "
                        f"{float((a - b).abs().max()):.3g}")


def _gather(obj: Any, group: Any, w: int) -> list[Any]:
    out: list[Any] = [None] * w
    dist.all_gather_object(out, obj, group=group)
    return out


def case_broadcast(w: int, group: Any) -> None:
    """broadcast_parameters and broadcast_optimizer_state make every rank equal to root."""
    rank = dist.get_rank()
    hvd.init(list(range(w)), **QUICK)
    try:
        root = w - 1
        model = mlp([4, 6, 3], seed=rank)
        hvd.broadcast_parameters(model.state_dict(), root_rank=root)
        states = _gather({k: v.clone() for k, v in model.state_dict().items()}, group, w)
        for k, v in states[root].items():
            assert torch.equal(model.state_dict()[k], v), f"state_dict {k} != root's"
        model2 = mlp([4, 6, 3], seed=50 + rank)
        hvd.broadcast_parameters(model2.named_parameters(), root_rank=0)
        params = _gather([p.detach().clone() for p in model2.parameters()], group, w)
        assert all(torch.equal(a, b) for a, b in zip(model2.parameters(), params[0],
                                                     strict=True)), "named_parameters != root's"
        opt = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1))
        if rank == root:  # only root has state (e.g. resumed from a checkpoint)
            nn.functional.mse_loss(model(torch.ones(2, 4)), torch.zeros(2, 3)).backward()
            opt.step()
        hvd.broadcast_optimizer_state(opt, root_rank=root)
        sd = opt.state_dict()
        mine = {"groups": [{k: v for k, v in g.items() if k != "params"}
                           for g in sd["param_groups"]],
                "state": {k: {n: t.clone() for n, t in s.items()}
                          for k, s in sd["state"].items()}}
        every = _gather(mine, group, w)
        assert mine["groups"] == every[root]["groups"], "hyperparameters != root's"
        assert mine["state"].keys() == every[root]["state"].keys() and mine["state"], \
            "optimizer state keys != root's"
        for k, s in every[root]["state"].items():
            for n, t in s.items():
                assert torch.equal(mine["state"][k][n], t), f"optimizer state {k}.{n} != root's"
        b = hvd.broadcast(torch.tensor([rank, 2 * rank]), root_rank=root, name="plain")
        assert b.tolist() == [root, 2 * root], b
        obj = hvd.broadcast_object({"rank": rank}, root_rank=root)
        assert obj == {"rank": root}, obj
    finally:
        hvd.shutdown()


def case_errors(w: int, group: Any) -> None:
    """Mismatches between ranks and bad calls fail with a clear error, not a hang."""
    rank = dist.get_rank()
    hvd.init(list(range(w)), cycle_time_ms=1, **QUICK)
    try:
        if w > 1:
            shape = (3,) if rank == 0 else (4,)
            try:
                hvd.allreduce(torch.zeros(shape), name="mismatch")
                raise AssertionError("mismatched shapes did not fail")
            except hvd.HorovodInternalError as exc:
                assert "mismatched shapes" in str(exc), exc
        h = hvd.allreduce_async(torch.zeros(2), name="dup")
        try:
            hvd.allreduce_async(torch.zeros(2), name="dup")
            raise AssertionError("a duplicate pending name was accepted")
        except ValueError as exc:
            assert "already pending" in str(exc), exc
        hvd.synchronize(h)
        for bad in (lambda: hvd.broadcast(torch.zeros(1), root_rank=w),
                    lambda: hvd.allreduce(torch.zeros(1), op="Max")):
            try:
                bad()
                raise AssertionError("a bad argument was accepted")
            except ValueError:
                pass
    finally:
        hvd.shutdown()


def case_optimizer(w: int, group: Any) -> None:
    """DistributedOptimizer is the wrapped class, guards its handles like Horovod's, and
    ``synchronize`` + ``skip_synchronize`` leave averaged gradients for clipping; ``poll``."""
    rank = dist.get_rank()
    hvd.init(list(range(w)), cycle_time_ms=1, **QUICK)
    try:
        model = mlp([3, 4, 2], seed=1)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters())
        assert isinstance(opt, torch.optim.SGD) and type(opt).__name__ == "SGD"
        x = torch.full((2, 3), float(rank + 1))

        def backward() -> None:
            model(x).sum().backward()

        backward()
        try:
            opt.zero_grad()
            raise AssertionError("zero_grad with all-reduces in flight was accepted")
        except AssertionError as exc:
            assert "before optimizer.step()" in str(exc), exc
        opt.synchronize()  # averaged gradients, now visible for clipping
        grads = [p.grad.clone() for p in model.parameters()]
        refs = [_reference(g, "Average", group, w) for g in grads]  # already averaged: unchanged
        for g, r in zip(grads, refs, strict=True):
            _same(g, r, "gradient after synchronize()")
        with opt.skip_synchronize():
            opt.step()
        opt.zero_grad()
        backward()
        try:
            backward()  # a second backward pass with backward_passes_per_step=1
            raise AssertionError("a second backward before step() was accepted")
        except (AssertionError, RuntimeError) as exc:
            assert "backward_passes_per_step" in str(exc), exc
        opt.synchronize()
        try:
            hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=[("a", p) for p in model.parameters()])
            raise AssertionError("duplicate parameter names were accepted")
        except ValueError as exc:
            assert "duplicate" in str(exc), exc
        h = hvd.allreduce_async(torch.ones(4), name="polled")
        deadline = time.monotonic() + 10
        while not hvd.poll(h):
            assert time.monotonic() < deadline, "poll never became true"
            time.sleep(0.001)
        _same(hvd.synchronize(h), torch.ones(4), "polled all-reduce")
    finally:
        hvd.shutdown()


def case_stall(w: int, group: Any) -> dict[str, Any]:
    """A tensor submitted by only some ranks: a warning naming the missing rank, then an
    error on the ranks that did submit it, within seconds; the engine then goes on."""
    rank = dist.get_rank()
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("backends.horovod").addHandler(handler)
    hvd.init(list(range(w)), cycle_time_ms=5, stall_check_time_s=0.5, stall_shutdown_time_s=1.5)
    out: dict[str, Any] = {}
    try:
        hvd.allreduce(torch.ones(2), name="warmup")  # cached from now on
        for name in ("lonely", "warmup"):  # never seen, then a cached one
            start = time.monotonic()
            if rank != 1:
                try:
                    hvd.allreduce(torch.ones(2), name=name)
                    out[name] = "no error"
                except hvd.HorovodInternalError as exc:
                    out[name] = str(exc)
            out[f"{name}_s"] = time.monotonic() - start
            dist.barrier(group=group)  # rank 1 waits for the others to give up
        got = hvd.allreduce(torch.ones(2) * rank, name="after", op=hvd.Sum)
        out["after"] = got.tolist()
    finally:
        hvd.shutdown()
        logging.getLogger("backends.horovod").removeHandler(handler)
    out["log"] = records
    return out


def case_timeline(w: int, group: Any) -> None:
    """With the timeline on, a cycle's spans are recorded in order, without overlap."""
    rank = dist.get_rank()
    hvd.init(list(range(w)), cycle_time_ms=10, timeline=True, **QUICK)
    try:
        hs = [hvd.allreduce_async(torch.ones(10) * rank, name=f"t{i}") for i in range(6)]
        for h in hs:
            hvd.synchronize(h)
        spans = hvd.timeline().spans
        fused = max(len(names) for _, _, names in hvd.stats()["fused"]) > 1
    finally:
        hvd.shutdown()
    enqueued = [s for s in spans if s.kind == "ENQUEUE"]
    assert [s.name for s in enqueued] == [f"allreduce.t{i}" for i in range(6)], enqueued
    assert all(s.start == s.end and s.nbytes == 40 for s in enqueued), enqueued
    spans = [s for s in spans if s.kind != "ENQUEUE"]  # the background thread's, in order
    kinds = {s.kind for s in spans}
    need = {"WAIT", "NEGOTIATE", "ALLREDUCE"}
    if fused:
        need |= {"MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER"}
    assert need <= kinds, f"missing span kinds {need - kinds}"
    assert all(s.rank == rank and s.end >= s.start for s in spans)
    for a, b in itertools.pairwise(spans):
        assert b.start >= a.end - 1e-6, f"overlapping spans {a} {b}"
    reduced = sum(s.nbytes for s in spans if s.kind == "ALLREDUCE")
    assert reduced == 6 * 10 * 4, f"all-reduce spans carry {reduced} bytes, expected 240"


CASES: list[tuple[str, Callable[[int, Any], Any], tuple[int, ...]]] = [
    ("allreduce", case_allreduce, (1, 2, 3, 4)),
    ("fusion", case_fusion, (1, 3, 4)),
    ("cache", case_cache, (2, 4)),
    ("parity", case_parity, (1, 2, 3)),
    ("broadcast", case_broadcast, (1, 3)),
    ("errors", case_errors, (1, 3)),
    ("optimizer", case_optimizer, (2,)),
    ("timeline", case_timeline, (2,)),
    ("stall", case_stall, (3,)),
]


def run_suite() -> dict[str, Any]:
    """Rank function: every case this rank takes part in; failures (and data) by feature."""
    rank = dist.get_rank()
    groups = {w: dist.new_group(list(range(w))) for w in range(1, WORLD + 1)}
    failures: dict[str, list[str]] = defaultdict(list)
    data: dict[str, Any] = {}
    for feature, fn, worlds in CASES:
        for w in worlds:
            if rank >= w:
                continue
            try:
                value = fn(w, groups[w])
                if value is not None:
                    data[f"{feature}/{w}"] = value
            except Exception as exc:
                failures[feature].append(f"world {w}, rank {rank}: {type(exc).__name__}: {exc}")
    return {"failures": dict(failures), "data": data}


def die_after_init(out_dir: str) -> str:
    """The last rank dies once Horovod is up; the others wait on an all-reduce that cannot
    finish and write down what they saw, and when (the launcher stops them soon after)."""
    hvd.init(cycle_time_ms=2)
    if hvd.rank() == hvd.size() - 1:
        os._exit(3)
    start = time.monotonic()
    try:
        hvd.allreduce(torch.ones(2), name="never")
        seen = "no error"
    except hvd.HorovodInternalError as exc:
        seen = str(exc)
    with open(os.path.join(out_dir, f"rank{hvd.rank()}.json"), "w") as f:
        json.dump({"error": seen, "after_s": time.monotonic() - start}, f)
    return seen


def env_main() -> None:
    """A task as horovodrun starts it: world from HOROVOD_* and MASTER_* (no spawn)."""
    hvd.init()
    got = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), name="x", op=hvd.Sum)
    print(json.dumps({"rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank(),
                      "local_size": hvd.local_size(), "cross_rank": hvd.cross_rank(),
                      "sum": got.item(), "threshold": hvd.stats()["fusion_threshold_bytes"],
                      "cycle_ms": hvd.stats()["cycle_time_ms"]}))
    hvd.shutdown()


if __name__ == "__main__" and sys.argv[1:] == ["env_main"]:
    env_main()
