"""The profiler: what each layer of a real model costs, measured on ONE process.

PipeDream's planner (Narayanan et al., SOSP 2019, §3.1) and torchgpipe's balancer (Kim et al.
2020, §3.3) both start from a per-layer profile. Like PipeDream's profiler, which times every
layer during a few ordinary training iterations on one worker, :func:`profile_layers` runs
whole training iterations of the real ``nn.Sequential`` on one micro-batch, in this one process,
and times every layer inside them — so each layer is measured as it runs in a stage, after its
neighbours (their weights have pushed its own out of the caches), not as a hot loop of itself.
A per-layer compute profile measured on one process is a *primitive*: it never looks at a
pipeline run.

* ``forward_s`` — median over iterations of the layer's forward (autograd recording, as in
  training; every layer's input but the first requires grad, like a stage's received input);
* ``backward_s`` — median of the time from the gradient reaching the layer's output to it
  reaching the layer's input (a hook on each boundary tensor); the first layer's backward
  ends when ``backward()`` returns. Weight-gradient accumulation falls in the layer's span;
* ``activation_bytes`` — bytes the layer saves for backward, counted with saved-tensor
  hooks (:mod:`backends.pipeline.memory`), what checkpointing trades for time;
* ``parameter_bytes`` — its parameters; ``output_bytes`` — its output, what crosses a stage
  boundary after it.

The result is a list of :class:`simulator.pipeline.profile.LayerProfile` that the balancer,
the planner and :func:`simulator.pipeline.simulate.simulate_pipeline` take unchanged.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

from backends.pipeline.memory import saved_bytes
from simulator.pipeline.profile import LayerProfile


def _iteration(layers: list[nn.Module], example: torch.Tensor,
               grad: torch.Tensor) -> tuple[list[float], list[float]]:
    """One training iteration of the layers in sequence; each layer's forward and backward
    time, s."""
    n = len(layers)
    forward, reached = [0.0] * n, [0.0] * (n + 1)  # reached[j]: gradient at layer j's input
    boundaries = []
    h = example
    for j, layer in enumerate(layers):
        start = time.perf_counter()
        h = layer(h)
        forward[j] = time.perf_counter() - start
        boundaries.append(h)

    def stamp(j: int) -> None:
        reached[j] = time.perf_counter()

    for j in range(1, n):  # layer j's input is layer j − 1's output
        if boundaries[j - 1].requires_grad:
            boundaries[j - 1].register_hook(lambda _, j=j: stamp(j))
    reached[n] = time.perf_counter()
    if h.requires_grad:
        torch.autograd.backward(h, grad)
    reached[0] = time.perf_counter()
    for j in range(n - 1, 0, -1):  # a layer whose input needs no gradient: nothing to time
        reached[j] = reached[j] or reached[j + 1]
    return forward, [reached[j] - reached[j + 1] for j in range(n)]


def profile_layers(model: nn.Sequential, example: torch.Tensor, repeats: int = 10,
                   warmup: int = 3) -> list[LayerProfile]:
    """Per-layer forward/backward time (s, median of ``repeats`` iterations), saved
    activation, parameter and output bytes of ``model`` on one micro-batch ``example``.

    The model's state (parameters, buffers, ``.grad``) is left as it was.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    layers = list(model.children())
    saved_grads = {p: p.grad for p in model.parameters()}
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    x = example.detach()
    with torch.random.fork_rng(devices=[]):
        with torch.no_grad():
            out = model(x)
        grad = torch.randn_like(out)
        times = [_iteration(layers, x, grad) for _ in range(warmup + repeats)][warmup:]
        profile, h = [], x
        for j, (name, layer) in enumerate(model.named_children()):
            with torch.no_grad():
                out = layer(h)
            profile.append(LayerProfile(
                name=name,
                forward_s=statistics.median(f[j] for f, _ in times),
                backward_s=statistics.median(b[j] for _, b in times),
                activation_bytes=saved_bytes(layer, h, j > 0),
                parameter_bytes=sum(p.numel() * p.element_size() for p in layer.parameters()),
                output_bytes=out.numel() * out.element_size()))
            h = out
    for p, g in saved_grads.items():
        p.grad = g
    with torch.no_grad():
        for name, b in model.named_buffers():
            b.copy_(buffers[name])
    return profile
