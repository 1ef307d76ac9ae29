"""A link of the α-β model and its contention models (:mod:`simulator.core.network`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from simulator.core.network.host_hooks import LinkEffects

Contention = Literal["none", "fifo", "fair"]
CONTENTION_MODELS: tuple[str, ...] = ("none", "fifo", "fair")
Node = int | str
Channel = tuple[Node, Node]
"""A link in one direction, ``(from, to)``."""


@dataclass(frozen=True)
class Link:
    """A full-duplex link.

    Attributes:
        latency_s: α, the time before the first byte arrives, s.
        bandwidth_Bps: B, bytes per second in each direction.
        contention: ``none``, ``fifo`` or ``fair`` (see the module docstring).
        host: the host effects on this link (:class:`LinkEffects`: a busy latency, a rate
            by load, …), set by the host tier only; ``None`` in the textbook tier.
    """

    latency_s: float
    bandwidth_Bps: float
    contention: Contention = "fair"
    host: LinkEffects | None = None

    def __post_init__(self) -> None:
        if not self.latency_s >= 0:
            raise ValueError(f"link latency must be >= 0 s, got {self.latency_s}")
        if not self.bandwidth_Bps > 0:
            raise ValueError(f"link bandwidth must be > 0 bytes/s, got {self.bandwidth_Bps}")
        if self.contention not in CONTENTION_MODELS:
            raise ValueError(f"unknown contention model {self.contention!r}; "
                             f"choose one of {', '.join(CONTENTION_MODELS)}")

    @property
    def beta_s_per_B(self) -> float:
        """β = 1/B, seconds per byte."""
        return 1.0 / self.bandwidth_Bps

    def time(self, nbytes: float) -> float:
        """α + n/B: the uncontended time of one ``nbytes`` message, s."""
        return self.latency_s + nbytes / self.bandwidth_Bps

    def with_host(self, **changes: Any) -> Link:
        """This link with the named fields of its host effects changed (:class:`LinkEffects`;
        ``host`` is ``None`` again where they all come back to their defaults)."""
        host = replace(self.host or LinkEffects(), **changes)
        return replace(self, host=None if host == LinkEffects() else host)
