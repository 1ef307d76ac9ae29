"""The real side: rank functions, run under :func:`backends.launch.spawn`.

* :func:`measure_steps` — ``backends.ddp.DistributedDataParallel`` and
  ``torch.nn.parallel.DistributedDataParallel`` at each bucket cap, repeats interleaved
  (:func:`backends.measure.measure_many`), one training step per call;
* :func:`measured_timeline` — one traced step of ours (forward, backward, optimizer spans
  and, per bucket, ``ready`` and ``allreduce`` spans); :func:`timeline` launches it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lab.ddp.profiling import build_mlp
from simulator.core.engine import Trace


def _step(model: Any, opt: Any, x: Any, y: Any) -> Callable[[], None]:
    import torch

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()  # type: ignore[no-untyped-call]
        opt.step()

    return step


def _models(widths: Sequence[int], caps: Sequence[float | None], batch: int,
            which: Sequence[str]) -> list[tuple[str, float | None, Callable[[], None]]]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as TorchDDP

    from backends.ddp import DistributedDataParallel

    gen = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(batch, widths[0], generator=gen)
    y = torch.randn(batch, widths[-1], generator=gen)
    steps = []
    for cap in caps:
        for name in which:
            net = build_mlp(widths)
            ddp = (TorchDDP(net, bucket_cap_mb=cap) if name == "pytorch" else
                   DistributedDataParallel(net, bucket_cap_mb=cap, overlap=name == "ours"))
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
            steps.append((name, cap, _step(ddp, opt, x, y)))
    return steps


def measure_steps(widths: Sequence[int], batch: int, caps: Sequence[float | None],
                  repeats: int = 10, which: Sequence[str] = ("ours", "pytorch", "ours-serial")
                  ) -> list[dict[str, Any]]:
    """Rank function: step time of each DDP at each bucket cap, repeats interleaved
    (``ours-serial``: ours with ``overlap=False``)."""
    from backends.measure import measure_many

    steps = _models(widths, caps, batch, which)
    timings = measure_many([fn for _, _, fn in steps], repeats=repeats, warmup=3, inner=1)
    return [{"ddp": name, "bucket_cap_mb": cap, **t.as_dict()}
            for (name, cap, _), t in zip(steps, timings, strict=True)]


def measured_timeline(widths: Sequence[int], batch: int, bucket_cap_mb: float | None,
                      steps: int = 3) -> list[dict[str, Any]]:
    """Rank function: the spans of the last of ``steps`` traced steps of our DDP, every rank."""
    import torch
    import torch.distributed as dist

    from backends.ddp import DistributedDataParallel
    from backends.trace import Tracer

    tracer = Tracer()
    model = DistributedDataParallel(build_mlp(widths), bucket_cap_mb=bucket_cap_mb,
                                    tracer=tracer)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(dist.get_rank())
    x, y = torch.randn(batch, widths[0], generator=gen), torch.randn(batch, widths[-1])
    for _ in range(steps):
        dist.barrier()
        tracer.trace.spans.clear()
        opt.zero_grad()
        with tracer.span("compute", "forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with tracer.span("compute", "backward + wait"):
            loss.backward()  # type: ignore[no-untyped-call]
        with tracer.span("compute", "optimizer"):
            opt.step()
    return tracer.gather().to_records()


def timeline(world: int, widths: Sequence[int], batch: int,
             bucket_cap_mb: float | None) -> Trace:
    """One measured step of our DDP on ``world`` ranks, shifted to start at 0."""
    from backends.launch import spawn

    records = spawn(measured_timeline, world, list(widths), batch, bucket_cap_mb)[0]
    return Trace.from_records(records).shifted()
