"""The workload: what backward computes, layer by layer.

A model as the DDP simulator sees it — layers in forward order, each with its parameters'
sizes and its forward and backward times on one free core — and :func:`mlp_workload`, a
multi-layer perceptron priced by its FLOPs.

Units: seconds, bytes, FLOP, FLOP/s.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    """One layer of the model, with its parameters and its compute times on one free core.

    Attributes:
        name: e.g. ``"fc3"``.
        param_bytes: sizes of the layer's trainable parameters, registration order, bytes.
        forward_s: forward time, s.
        backward_s: backward time (its gradients and its input's gradient), s.
    """

    name: str
    param_bytes: tuple[int, ...]
    forward_s: float
    backward_s: float


@dataclass(frozen=True)
class Workload:
    """A model as the simulator sees it: layers in forward order, float32 parameters."""

    layers: tuple[Layer, ...]
    batch: int = 0

    @property
    def param_sizes(self) -> list[int]:
        """Every parameter's size, registration order, bytes."""
        return [b for layer in self.layers for b in layer.param_bytes]

    @property
    def param_bytes(self) -> int:
        """All parameters, bytes."""
        return sum(self.param_sizes)

    @property
    def compute_s(self) -> float:
        """Forward plus backward on one free core, s."""
        return sum(layer.forward_s + layer.backward_s for layer in self.layers)


def mlp_workload(widths: Sequence[int], batch: int, flops_per_s: float,
                 itemsize: int = 4) -> Workload:
    """A multi-layer perceptron ``widths[0] → widths[1] → …`` priced by its FLOPs.

    A ``Linear(a, b)`` on a batch of ``B`` costs ``2·B·a·b`` FLOP forward and twice that
    backward (the weight gradient and the input gradient), except the first layer, whose input
    needs no gradient (Kaplan et al. 2020, "C ≈ 6N" per token). ``flops_per_s`` is one core's
    rate.
    """
    if len(widths) < 2 or min(widths) < 1 or batch < 1 or not flops_per_s > 0:
        raise ValueError("an MLP needs at least two widths ≥ 1, a batch ≥ 1 and FLOP/s > 0")
    layers = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        fwd = 2.0 * batch * a * b
        bwd = fwd * (1 if i == 0 else 2)
        layers.append(Layer(f"fc{i}", (a * b * itemsize, b * itemsize), fwd / flops_per_s,
                            bwd / flops_per_s))
    return Workload(tuple(layers), batch)
