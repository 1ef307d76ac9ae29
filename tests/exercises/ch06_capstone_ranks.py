"""Rank program for grading capstone 6.4 on real processes: the student's ``BucketedDDP``
beside ``torch.nn.parallel.DistributedDataParallel``, its all-reduces and gradient hooks traced.

Every ``dist.all_reduce`` the wrapper calls is recorded (:class:`Recorder`): its size, its
buffer, whether it was asynchronous, and an ``allreduce`` span of a
:class:`backends.trace.Tracer` from launch to completion (a callback on the work's future);
the work handed back stamps its ``wait()``. The grader's own gradient hooks, registered
before the wrapper's, stamp each gradient's arrival (``grad`` spans of zero length), so the
tests can read the order of launches, their sizes, and whether they started — or were
waited for — before backward's last gradient. The measured spans share the schema of
:func:`simulator.ddp.predict_step`'s trace, and :func:`hidden_share` reads both alike.
:func:`grade` runs every case of one world size and returns one report; a stub is reported
as ``{"todo": …}``.
"""

from __future__ import annotations

import copy
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import distributed_c10d as c10d
from torch.nn.parallel import DistributedDataParallel as TorchDDP

from backends.trace import Tracer
from exercises import load
from simulator.core import Cluster, Device, Link, Topology
from simulator.core.engine import Span
from simulator.ddp import Layer, Workload, assign_buckets, predict_step

AWKWARD = (13, 37, 29, 11, 7)
"""Widths of the parity MLP: no size divides another, so no bucket falls on a round number."""
CAPS = (370, 1, 10**6)
"""Bucket caps, bytes: 370 splits the third layer (its bias in bucket 0, its weight in bucket 1);
1 puts each parameter alone; 10⁶ puts all of them in one bucket."""
STEPS = 3
"""SGD steps (momentum 0.9) before the parameters are compared."""
OVERLAP_WIDTHS = (256, 768, 768, 768, 768, 768, 16)
OVERLAP_BATCH = 64
OVERLAP_CAP = 2**20
"""The overlap workload: layers of a few ms of backward each on one core, a 1 MiB cap giving
five buckets of about one layer each (2.4 MB all-reduces of a few ms at 2 ranks)."""
OVERLAP_STEPS = 10


class Recorder:
    """Records each ``dist.all_reduce`` call as a span of ``tracer`` while installed."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.calls: list[dict[str, Any]] = []

    @contextmanager
    def installed(self) -> Iterator[None]:
        real = c10d.all_reduce

        def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            call = {"numel": tensor.numel(), "ptr": tensor.data_ptr(), "start": start,
                    "async": bool(kwargs.get("async_op", args[2] if len(args) > 2 else False))}
            self.calls.append(call)
            work = real(tensor, *args, **kwargs)
            nbytes = tensor.numel() * tensor.element_size()

            def done(_: Any) -> None:
                end = time.perf_counter()
                self.tracer.trace.record(self.tracer.rank, "allreduce",
                                         f"all-reduce {tensor.numel()}", start, end, nbytes)
                call["end"] = end  # last: _wait_for_ends then finds the span recorded
            if work is None:
                done(None)
                return None
            work.get_future().then(done)
            return Traced(work, call)

        saved = [(m, m.all_reduce) for m in (dist, c10d)]
        for module, _ in saved:
            module.all_reduce = all_reduce
        try:
            yield
        finally:
            for module, original in saved:
                module.all_reduce = original


class Traced:
    """A work handed to the code under test: ``wait()`` is stamped, the rest passes through."""

    def __init__(self, work: Any, call: dict[str, Any]) -> None:
        self._work, self._call = work, call

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        self._call.setdefault("waited", time.perf_counter())
        return self._work.wait(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


def mlp(widths: tuple[int, ...], seed: int) -> nn.Sequential:
    """A seeded MLP: Linear layers with Tanh between them."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers[:-1])


class WithUnused(nn.Module):
    """An MLP with a frozen layer and a layer forward never uses, registered in between."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.fc1, self.frozen = nn.Linear(13, 37), nn.Linear(37, 37)
        self.unused, self.fc2 = nn.Linear(5, 5), nn.Linear(37, 7)
        self.frozen.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.frozen(torch.tanh(self.fc1(x)))))


def _train(model: nn.Module, inputs: list[torch.Tensor], on_step: Callable[[int], None]
           ) -> None:
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1,
                          momentum=0.9)
    for step, x in enumerate(inputs):
        on_step(step)
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()


def _parity(make: Callable[[int], nn.Module], cap: int, width: int, recorder: Recorder,
            find_unused: bool = False, group: dist.ProcessGroup | None = None
            ) -> dict[str, Any]:
    """Train ours and PyTorch's DDP from rank-seeded replicas; report what the tests read."""
    rank = dist.get_rank()
    ours_net = make(100 + rank)  # different on every rank: the broadcast must fix that
    ref = TorchDDP(copy.deepcopy(ours_net), bucket_cap_mb=cap / 2**20,
                   find_unused_parameters=find_unused, process_group=group)
    params = [p for p in ours_net.parameters() if p.requires_grad]
    hook_times: list[list[float]] = [[] for _ in range(STEPS)]
    marks: list[int] = []  # recorder.calls[marks[k]:marks[k + 1]] are step k's all-reduces
    for p in params:  # before the wrapper's hooks: a gradient is stamped before it is bucketed
        p.register_post_accumulate_grad_hook(
            lambda _p: hook_times[len(marks) - 1].append(time.perf_counter()))
    ours = load("ch06_capstone_ddp").BucketedDDP(ours_net, cap, group)
    flat = torch.cat([p.detach().flatten() for p in ours_net.parameters()])
    root = flat.clone()
    dist.broadcast(root, 0 if group is None else dist.get_global_rank(group, 0), group=group)
    gen = torch.Generator().manual_seed(7 + rank)
    inputs = [torch.randn(5, width, generator=gen) for _ in range(STEPS)]
    _train(ours, inputs, lambda step: marks.append(len(recorder.calls)))
    marks.append(len(recorder.calls))
    _train(ref, inputs, lambda step: None)
    steps = [recorder.calls[marks[k]:marks[k + 1]] for k in range(STEPS)]
    calls = recorder.calls[marks[0]:]
    sizes = [p.numel() * p.element_size() for p in params]
    expected = [sum(params[i].numel() for i in b) for b in assign_buckets(sizes, cap, cap)]
    diffs = [float((a - b).detach().abs().max()) for a, b in zip(ours_net.parameters(),
                                                        ref.module.parameters(), strict=True)]
    no_grad = [name for name, p in ours_net.named_parameters()
               if p.requires_grad and p.grad is None]
    ref_no_grad = [name for name, p in ref.module.named_parameters()
                   if p.requires_grad and p.grad is None]
    return {
        "cap": cap, "max_diff": max(diffs), "start_equal": bool(torch.equal(flat, root)),
        "expected_numels": expected,
        "numels": [[c["numel"] for c in s] for s in steps],
        "distinct_buffers": [len({c["ptr"] for c in s}) for s in steps],
        "all_async": all(c["async"] for c in calls),
        "first_launch_before_last_grad": [bool(s) and bool(h) and s[0]["start"] < max(h)
                                          for s, h in zip(steps, hook_times, strict=True)],
        "waited_in_backward": [any(c.get("waited", math.inf) < max(h, default=0.0) for c in s)
                               for s, h in zip(steps, hook_times, strict=True)],
        "no_grad": no_grad, "ref_no_grad": ref_no_grad,
    }


def _overlap(recorder: Recorder, tracer: Tracer) -> dict[str, Any]:
    """One traced workload: the share of communication hidden behind backward, measured, beside
    the simulator's prediction for the same layers and buckets, timed on this host."""
    net = mlp(OVERLAP_WIDTHS, 5)
    params = list(net.parameters())
    gen = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(OVERLAP_BATCH, OVERLAP_WIDTHS[0], generator=gen)
    layer_s = _layer_backward_s(net, x)
    sizes = [p.numel() * 4 for p in params]
    buckets = assign_buckets(sizes, OVERLAP_CAP, OVERLAP_CAP)
    solo = {n: _solo_all_reduce_s(n) for n in {sum(sizes[i] for i in b) for b in buckets}}
    for k, p in enumerate(params):  # before the wrapper's hooks, as in _parity
        p.register_post_accumulate_grad_hook(lambda _p, k=k: tracer.trace.record(
            tracer.rank, "grad", f"gradient {k}", time.perf_counter(), time.perf_counter()))
    ours = load("ch06_capstone_ddp").BucketedDDP(net, OVERLAP_CAP)
    shares, waited = [], []
    for _ in range(OVERLAP_STEPS):
        dist.barrier()
        first = len(recorder.calls)
        tracer.trace.spans.clear()
        net.zero_grad()
        ours(x).square().mean().backward()
        calls = recorder.calls[first:]
        _wait_for_ends(calls)
        last_grad = max(s.end for s in tracer.trace.spans if s.kind == "grad")
        shares.append(hidden_share(tracer.trace.spans, last_grad))
        waited.append(any(c.get("waited", math.inf) < last_grad for c in calls))
    workload = Workload(tuple(Layer(f"fc{k}", (sizes[2 * k], sizes[2 * k + 1]), 0.0, t)
                              for k, t in enumerate(layer_s)))
    device = Device("this host", 1e12, 1e12, 1e12)
    cluster = Cluster.homogeneous("host", device, Topology.fully_connected(
        dist.get_world_size(), Link(1e-6, 1e9)))
    sim = predict_step(cluster, workload, OVERLAP_CAP, OVERLAP_CAP,
                       all_reduce=lambda _c, n: solo[n])
    return {"measured": statistics.mean(shares), "waited_in_backward": any(waited),
            "predicted": hidden_share(sim.trace.for_rank(0), sim.backward_end_s),
            "buckets": len(buckets), "layer_s": layer_s, "solo_s": sorted(solo.values())}


def hidden_share(spans: Iterable[Span], backward_end: float) -> float:
    """The share of the ``allreduce`` spans' time that lies before ``backward_end`` (every
    span starts after backward has begun): communication hidden behind backward."""
    comm = [(s.start, s.end) for s in spans if s.kind == "allreduce"]
    total = sum(end - start for start, end in comm)
    hidden = sum(max(0.0, min(end, backward_end) - start) for start, end in comm)
    return hidden / total if total > 0 else 0.0


def _wait_for_ends(calls: list[dict[str, Any]], limit_s: float = 5.0) -> None:
    """The completion callbacks run on gloo's threads just after ``wait()`` returns: give
    them up to ``limit_s`` to stamp every call's end."""
    give_up = time.perf_counter() + limit_s
    while any("end" not in c for c in calls) and time.perf_counter() < give_up:
        time.sleep(1e-4)
    for c in calls:
        c.setdefault("end", time.perf_counter())


def _layer_backward_s(net: nn.Sequential, x: torch.Tensor) -> list[float]:
    """Backward time of each Linear layer, s (median of 5, every rank at once): the gap
    between the gradient hooks of consecutive layers, no communication running."""
    linears = [m for m in net if isinstance(m, nn.Linear)]
    stamps: dict[int, float] = {}
    handles = [m.weight.register_post_accumulate_grad_hook(
        lambda _p, k=k: stamps.__setitem__(k, time.perf_counter()))
        for k, m in enumerate(linears)]
    runs = []
    for _ in range(5):
        dist.barrier()
        net.zero_grad()
        y = net(x).square().mean()
        start = time.perf_counter()
        y.backward()
        ends = [stamps[k] for k in range(len(linears))]
        previous = [*ends[1:], start]
        runs.append([e - p for e, p in zip(ends, previous, strict=True)])
    for h in handles:
        h.remove()
    net.zero_grad()
    return [statistics.median(r[k] for r in runs) for k in range(len(linears))]


def _solo_all_reduce_s(nbytes: int) -> float:
    """One all-reduce of ``nbytes`` alone, every rank at once, s (median of 5)."""
    t = torch.zeros(nbytes // 4)
    times = []
    for _ in range(5):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def grade(overlap: bool) -> dict[str, Any]:
    """Every case at this world size: parity and structure at each cap, unused parameters,
    at 4 ranks two process groups of two, and (``overlap``) the traced overlap workload."""
    tracer = Tracer()
    recorder = Recorder(tracer)
    report: dict[str, Any] = {"cases": [], "unused": None, "overlap": None, "group": None}
    with recorder.installed():
        try:
            for cap in CAPS:
                report["cases"].append(_case(_parity, lambda s: mlp(AWKWARD, s), cap,
                                             AWKWARD[0], recorder))
            report["unused"] = _case(_parity, WithUnused, 1, 13, recorder, find_unused=True)
            if dist.get_world_size() == 4:  # two groups of two: ranks {0, 1} and {2, 3}
                groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
                report["group"] = _case(_parity, lambda s: mlp(AWKWARD, s), CAPS[0],
                                        AWKWARD[0], recorder, group=groups[dist.get_rank() // 2])
            if overlap:
                report["overlap"] = _case(_overlap, recorder, tracer)
        except NotImplementedError as exc:
            return {"todo": str(exc)}
    return report


def _case(run: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """One case's report, or ``{"error": …}`` when the code under test raised (a stub's
    NotImplementedError passes through: the whole grade is then "not implemented")."""
    try:
        return run(*args, **kwargs)
    except NotImplementedError:
        raise
    except Exception as exc:  # the student's bug: this case fails, the others still count
        if "not implemented" in str(exc).lower() or "EXERCISE 6.4" in str(exc):
            raise NotImplementedError(str(exc)) from exc
        return {"error": f"{type(exc).__name__}: {exc}"}
