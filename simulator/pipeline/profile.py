"""A layer profile: what one layer of a model costs, measured or modelled.

PipeDream's planner and torchgpipe's balancer both start from a *profile* — for each layer of a
sequential model, its forward and backward compute time for one micro-batch, the activation it
keeps for the backward pass and the parameters it holds (PipeDream, Narayanan et al. SOSP 2019,
§3.1 "Profiler"; torchgpipe, Kim et al. 2020, §3.3 "balance by time / by size"). The real
profiler (:mod:`backends.pipeline`) measures these on one process; a workload model can write
them down from FLOPs. Both give a ``list[LayerProfile]``, which the simulator, the balancer and
the planner take unchanged.

Units: seconds and bytes, for ONE micro-batch of the size the profile was taken at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LayerProfile:
    """The cost of one layer for one micro-batch.

    Attributes:
        name: the layer's name (``"0"``, ``"fc1"``, ``"block.3"``).
        forward_s: forward compute time, s.
        backward_s: backward compute time, s.
        activation_bytes: bytes the layer keeps alive for its backward pass (what activation
            checkpointing frees and recomputes), per micro-batch.
        parameter_bytes: bytes of the layer's parameters (weights; a stashed weight version
            costs this much again).
        output_bytes: bytes of the layer's output per micro-batch — what crosses to the next
            stage when a stage boundary follows this layer, and what a checkpointed stage
            keeps as its input. ``None`` means the same as ``activation_bytes``.
        forward_together_s / backward_together_s: the same compute while other processes
            of the host compute at the same moment (shared cache and memory bandwidth), s;
            ``None``: as alone (see :class:`simulator.core.cores.CorePool`).
    """

    name: str
    forward_s: float
    backward_s: float
    activation_bytes: int
    parameter_bytes: int
    output_bytes: int | None = None
    forward_together_s: float | None = None
    backward_together_s: float | None = None

    def __post_init__(self) -> None:
        for field_name in ("forward_s", "backward_s", "activation_bytes", "parameter_bytes",
                           "forward_together_s", "backward_together_s"):
            if (getattr(self, field_name) or 0) < 0:
                raise ValueError(f"layer {self.name!r}: {field_name} must be ≥ 0, "
                                 f"got {getattr(self, field_name)}")
        if self.output_bytes is not None and self.output_bytes < 0:
            raise ValueError(f"layer {self.name!r}: output_bytes must be ≥ 0, "
                             f"got {self.output_bytes}")

    @property
    def out_bytes(self) -> int:
        """Bytes of the output per micro-batch (``output_bytes``, else ``activation_bytes``)."""
        return self.activation_bytes if self.output_bytes is None else self.output_bytes

    @property
    def time_s(self) -> float:
        """Forward plus backward time, s (what torchgpipe's balance by time weighs)."""
        return self.forward_s + self.backward_s


def uniform_profile(layers: int, forward_s: float, backward_s: float,
                    activation_bytes: int = 0, parameter_bytes: int = 0,
                    output_bytes: int | None = None) -> list[LayerProfile]:
    """``layers`` identical layers named ``"0"``, ``"1"``, … (a textbook model)."""
    if layers < 1:
        raise ValueError(f"a profile needs at least one layer, got {layers}")
    return [LayerProfile(str(i), forward_s, backward_s, activation_bytes, parameter_bytes,
                         output_bytes) for i in range(layers)]


def stage_profiles(profile: Sequence[LayerProfile],
                   balance: Sequence[int]) -> list[list[LayerProfile]]:
    """Split a profile into contiguous stages of ``balance[k]`` layers each (torchgpipe's
    ``balance``)."""
    if any(b < 1 for b in balance):
        raise ValueError(f"every stage needs at least one layer, got balance {list(balance)}")
    if sum(balance) != len(profile):
        raise ValueError(f"balance {list(balance)} sums to {sum(balance)} layers but the "
                         f"profile has {len(profile)}")
    stages, start = [], 0
    for b in balance:
        stages.append(list(profile[start:start + b]))
        start += b
    return stages
