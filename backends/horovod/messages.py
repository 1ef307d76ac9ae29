"""Negotiation messages: what a rank asks for one tensor, what all ranks will execute.

Book chapter 7, "Background-thread architecture"; re-implemented after reading Horovod's
``horovod/common/message.h`` (``Request``, ``RequestList``, ``Response``, ``ResponseList``); no
code is taken from it. A :class:`Request` is small and goes to the coordinator; a
:class:`Response` names one collective over one or more (fused) tensors. The negotiation that
turns one into the other is :class:`backends.horovod.negotiation.Controller`, and it talks
through a :class:`ControlChannel` (a gloo group in the engine, memory in the lab's threads).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

ALLREDUCE = "ALLREDUCE"
BROADCAST = "BROADCAST"
ERROR = "ERROR"


@dataclass(frozen=True)
class Request:
    """What one rank asks for one tensor: small, sent to the coordinator.

    Attributes:
        name: the tensor's name, the key the ranks are matched by.
        rank: the requesting rank.
        op: ``ALLREDUCE`` or ``BROADCAST``.
        dtype: e.g. ``"float32"``.
        shape: the tensor's shape.
        reduce_op: ``"Sum"`` or ``"Average"`` (all-reduce only).
        root_rank: the broadcast's root (broadcast only).
    """

    name: str
    rank: int
    op: str
    dtype: str
    shape: tuple[int, ...]
    reduce_op: str = "Sum"
    root_rank: int = -1

    @property
    def numel(self) -> int:
        """Elements of the tensor."""
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class Response:
    """What all ranks will execute: one collective over one or more (fused) tensors.

    Attributes:
        op: ``ALLREDUCE``, ``BROADCAST`` or ``ERROR``.
        names: the tensors, in buffer order.
        numels: elements of each tensor.
        dtype: the tensors' dtype.
        reduce_op: ``"Sum"`` or ``"Average"``.
        root_rank: the broadcast's root.
        error: the message of an ``ERROR`` response.
        itemsize: bytes per element.
    """

    op: str
    names: list[str]
    numels: list[int] = field(default_factory=list)
    dtype: str = ""
    reduce_op: str = "Sum"
    root_rank: int = -1
    error: str = ""
    itemsize: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes of all its tensors."""
        return sum(self.numels) * self.itemsize


@dataclass
class RequestList:
    """One rank's uncached requests of one cycle, and whether it wants to shut down."""

    requests: list[Request]
    shutdown: bool = False


@dataclass
class ResponseList:
    """The cycle's agreed, fused responses, and whether every rank must shut down."""

    responses: list[Response]
    shutdown: bool = False


class ControlChannel(Protocol):
    """The negotiation's messages (implemented on a gloo group in the engine)."""

    def bitwise_and(self, words: list[int]) -> list[int]:
        """All-reduce of int words with bitwise AND."""
        ...

    def bitwise_or(self, words: list[int]) -> list[int]:
        """All-reduce of int words with bitwise OR."""
        ...

    def gather(self, item: RequestList) -> list[RequestList] | None:
        """Every rank's request list on rank 0 (``None`` elsewhere)."""
        ...

    def broadcast(self, item: ResponseList | None) -> ResponseList:
        """Rank 0's response list on every rank."""
        ...
