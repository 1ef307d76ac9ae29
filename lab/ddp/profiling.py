"""The MLP of the DDP lab and its per-layer compute profile, measured on ONE process.

:func:`profile_layers` is a primitive: forward and backward of each ``Linear`` + ReLU alone,
median of repeats, one thread, turned into a :class:`simulator.ddp.Workload`.

Units: seconds, bytes.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from simulator.ddp import Layer, Workload

DEFAULT_WIDTHS = (1024,) * 10
"""The benchmark's MLP: nine 1024×1024 ``Linear`` layers, 36 MiB of float32 parameters."""
DEFAULT_BATCH = 32
SMOKE_WIDTHS = (256,) * 5
"""A small MLP (1 MiB) for smoke runs and the notebook's quick mode."""


def build_mlp(widths: Sequence[int], seed: int = 0) -> Any:
    """``Linear → ReLU → … → Linear`` with the given widths (float32, seeded;
    :func:`lab.models.mlp`)."""
    from torch import nn

    from lab.models import mlp

    return mlp(widths, seed, nn.ReLU)


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return sorted(samples)[len(samples) // 2]


def profile_layers(widths: Sequence[int], batch: int, repeats: int = 15) -> Workload:
    """Forward and backward time of every layer, measured alone on this one process, s.

    Each ``Linear(a, b)`` (+ ReLU) runs on a ``batch × a`` input; its backward computes the
    weight and bias gradients and, except for the first layer, the input's gradient — what
    autograd does for it inside the whole model. One thread (``torch.set_num_threads(1)``),
    as every rank runs.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        layers = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layer = torch.nn.Linear(a, b)
            x = torch.randn(batch, a, requires_grad=i > 0)
            act = torch.relu if i < len(widths) - 2 else (lambda t: t)
            fwd = _median_time(lambda: act(layer(x)), repeats)  # noqa: B023
            upstream = torch.randn(batch, b)

            def backward() -> None:
                out = act(layer(x))  # noqa: B023
                torch.autograd.backward(out, upstream)  # noqa: B023

            layer.zero_grad(set_to_none=True)
            total = _median_time(backward, repeats)
            layers.append(Layer(f"fc{i}", (a * b * 4, b * 4), fwd, max(total - fwd, 0.0)))
        return Workload(tuple(layers), batch)
    finally:
        torch.set_num_threads(threads)
