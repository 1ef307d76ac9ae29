"""Messages: a small header (PS-Lite's ``Meta``) and tensor payloads.

PS-Lite (``include/ps/internal/message.h``) sends every message as a header — who sent it to
whom, what it asks (command), its timestamp, its keys — followed by data blobs. Our twin packs
the header into one fixed-size ``int64`` tensor of :data:`HEADER_FIELDS` entries
(:data:`HEADER_BYTES` bytes) so that a receiver can post a receive for it without knowing
anything in advance; the payload sizes it announces follow as separate point-to-point messages:

    header  int64[14]            always
    keys    int64[nkeys]         unless the keys are one contiguous range (sent as begin, end)
    vals    float32[nvals]       when the message carries values

Contiguous key ranges (a dense model's parameters) travel as two numbers in the header instead
of ``8·nkeys`` bytes: the simulated twin counts the same bytes (:func:`message_nbytes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum

import torch

from simulator.parameter_server import HEADER_BYTES, HEADER_FIELDS


class Command(IntEnum):
    """What a message asks for (PS-Lite's ``Control::Command`` plus data)."""

    DATA = 0  # a key-value request or response of an app (push, pull, clock)
    ADD_NODE = 1  # a node registers with the scheduler at start-up
    NODE_TABLE = 2  # the scheduler's answer: every node's role, pid and host
    BARRIER = 3  # a node reached a barrier of a group
    BARRIER_DONE = 4  # the scheduler releases a barrier
    TERMINATE = 5  # stop the receiving thread


@dataclass
class Meta:
    """The header of one message (all fields are integers; -1 means "not set").

    Attributes:
        sender, recipient: node ids (our node id is the ``torch.distributed`` rank).
        command: a :class:`Command`.
        timestamp: the request's timestamp at its sender; a response carries it back.
        app_id: which app (customer) the message is for.
        request: 1 for a request, 0 for a response.
        push, pull: what a data request does (both: push-then-pull); a clock request has
            neither.
        clock: on a push, the worker's iteration; on a response, the server's slowest worker
            clock (iterations every worker has pushed); on a clock request, the clock to wait
            for; on a barrier, the group.
        nkeys, key_begin, key_end: the keys, and when ``keys_range`` is 1 they are exactly
            ``key_begin … key_end − 1`` and no keys payload follows.
        nvals: float32 values that follow.
    """

    sender: int = -1
    recipient: int = -1
    command: int = Command.DATA
    timestamp: int = -1
    app_id: int = 0
    request: int = 1
    push: int = 0
    pull: int = 0
    clock: int = -1
    nkeys: int = 0
    key_begin: int = 0
    key_end: int = 0
    keys_range: int = 0
    nvals: int = 0

    def pack(self) -> torch.Tensor:
        """The header as an ``int64`` tensor."""
        return torch.tensor([getattr(self, f.name) for f in fields(self)], dtype=torch.int64)

    @classmethod
    def unpack(cls, header: torch.Tensor) -> Meta:
        """Inverse of :meth:`pack`."""
        return cls(*(int(v) for v in header.tolist()))


assert len(fields(Meta)) == HEADER_FIELDS and 8 * HEADER_FIELDS == HEADER_BYTES


@dataclass
class Message:
    """A header and its payloads (PS-Lite's ``Message``: ``meta`` and ``data``)."""

    meta: Meta
    keys: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.int64))
    vals: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.float32))

    def seal(self) -> Message:
        """Fill the header's payload fields from the tensors (keys as a range when they are
        one)."""
        m, keys = self.meta, self.keys
        m.nkeys, m.nvals = keys.numel(), self.vals.numel()
        m.keys_range = 0
        if m.nkeys:
            m.key_begin, m.key_end = int(keys[0]), int(keys[-1]) + 1
            m.keys_range = int(m.key_end - m.key_begin == m.nkeys)
        return self
