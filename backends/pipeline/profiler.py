"""The profiler: what each layer of a real model costs, measured on ONE process.

PipeDream's planner (Narayanan et al., SOSP 2019, §3.1) and torchgpipe's balancer (Kim et al.
2020, §3.3) both start from a per-layer profile. :func:`profile_layers` measures it on the
real ``nn.Sequential`` for one micro-batch of a given shape, in this one process (a per-layer
compute profile is a *primitive* measurement — it never looks at a pipeline run):

* ``forward_s`` — median over repeats of the layer's forward with autograd recording, as in
  training (input requiring grad except for the first layer, like a stage's received input);
* ``backward_s`` — median of ``torch.autograd.backward`` through that forward, given an
  output gradient;
* ``activation_bytes`` — bytes the layer saves for backward, counted with saved-tensor
  hooks (:mod:`backends.pipeline.memory`), the quantity checkpointing trades for time;
* ``parameter_bytes`` — bytes of its parameters; ``output_bytes`` — bytes of its output,
  what crosses a stage boundary after it.

The result is a list of :class:`simulator.pipeline.profile.LayerProfile` that the balancer,
the planner and :func:`simulator.pipeline.simulate.simulate_pipeline` take unchanged.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from backends.pipeline.memory import saved_bytes
from simulator.pipeline.profile import LayerProfile


def _median_time(fn: Callable[[], None], repeats: int, warmup: int) -> float:
    samples = []
    for k in range(warmup + repeats):
        start = time.perf_counter()
        fn()
        if k >= warmup:
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def profile_layers(model: nn.Sequential, example: torch.Tensor, repeats: int = 10,
                   warmup: int = 3) -> list[LayerProfile]:
    """Per-layer forward/backward time (s, median of ``repeats``), saved activation, parameter
    and output bytes of ``model`` on one micro-batch ``example``.

    The model's state (parameters, buffers, ``.grad``) is left as it was.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    profile = []
    x = example.detach()
    saved_grads = {p: p.grad for p in model.parameters()}
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    with torch.random.fork_rng(devices=[]):
        for j, (name, layer) in enumerate(model.named_children()):
            needs_grad = j > 0 and x.is_floating_point()
            inp = x.detach().requires_grad_(needs_grad)
            with torch.no_grad():
                out = layer(inp)
            grad = torch.randn_like(out) if out.is_floating_point() else None

            def forward(layer: nn.Module = layer, inp: torch.Tensor = inp) -> None:
                layer(inp)

            def backward(layer: nn.Module = layer, inp: torch.Tensor = inp,
                         grad: torch.Tensor | None = grad) -> None:
                y = layer(inp)
                if y.requires_grad:
                    torch.autograd.backward(y, grad)

            forward_s = _median_time(forward, repeats, warmup)
            both_s = _median_time(backward, repeats, warmup)
            profile.append(LayerProfile(
                name=name, forward_s=forward_s, backward_s=max(both_s - forward_s, 0.0),
                activation_bytes=saved_bytes(layer, inp, needs_grad),
                parameter_bytes=sum(p.numel() * p.element_size() for p in layer.parameters()),
                output_bytes=out.numel() * out.element_size()))
            x = out
    for p, g in saved_grads.items():
        p.grad = g
    with torch.no_grad():
        for name, b in model.named_buffers():
            b.copy_(buffers[name])
    return profile
