"""The response cache: recent responses, identical on every rank, one bit each.

Book chapter 7, "Background-thread architecture"; re-implemented after reading Horovod's
``horovod/common/response_cache.cc`` (``ResponseCache``); no code is taken from it. Once every
rank has cached a tensor's response, a cycle's negotiation of it is one bit in a bit vector
all-reduced with bitwise AND (:class:`backends.horovod.negotiation.Controller`) instead of a
request list sent to the coordinator.
"""

from __future__ import annotations

from collections import OrderedDict

from backends.horovod.messages import Request, Response

HIT, INVALID, MISS = "hit", "invalid", "miss"


class ResponseCache:
    """Recent single-tensor responses, identical on every rank, each with a bit position.

    Least-recently-used order; bits are reassigned by position (least recently used gets the
    lowest bit) by :meth:`update_bits` once per cycle, on every rank alike. When full, a new
    entry evicts the least recently used one and takes its bit.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # name -> (response, (dtype, shape)); first = least recently used
        self._entries: OrderedDict[str, tuple[Response, tuple[str, tuple[int, ...]]]] = \
            OrderedDict()
        self._bit_of: dict[str, int] = {}
        self._name_at: list[str | None] = []
        self._outdated = False

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def num_active_bits(self) -> int:
        """Bit positions in use (holes left by erasures count until the next update)."""
        return len(self._name_at)

    def cached(self, request: Request) -> str:
        """``HIT``, ``INVALID`` (name cached with another dtype or shape) or ``MISS``."""
        entry = self._entries.get(request.name)
        if entry is None:
            return MISS
        return HIT if entry[1] == (request.dtype, request.shape) else INVALID

    def bit(self, name: str) -> int:
        """The bit position of a cached name."""
        return self._bit_of[name]

    def peek(self, bit: int) -> Response:
        """The response at ``bit``, without touching the LRU order."""
        name = self._name_at[bit]
        assert name is not None
        return self._entries[name][0]

    def get(self, bit: int) -> Response:
        """The response at ``bit``, now the most recently used."""
        name = self._name_at[bit]
        assert name is not None
        self._entries.move_to_end(name)
        self._outdated = True
        return self._entries[name][0]

    def put(self, response: Response, shapes: dict[str, tuple[int, ...]]) -> None:
        """Insert a (possibly fused) all-reduce response, split per tensor, as most recent."""
        for name, numel in zip(response.names, response.numels, strict=True):
            single = Response(response.op, [name], [numel], response.dtype, response.reduce_op,
                              itemsize=response.itemsize)
            params = (response.dtype, shapes[name])
            if name in self._entries:
                self._entries[name] = (single, params)
                self._entries.move_to_end(name)
            elif len(self._entries) >= self.capacity:
                old, _ = self._entries.popitem(last=False)
                bit = self._bit_of.pop(old)
                self._entries[name] = (single, params)
                self._bit_of[name] = bit
                self._name_at[bit] = name
            else:
                self._entries[name] = (single, params)
                self._bit_of[name] = len(self._name_at)
                self._name_at.append(name)
            self._outdated = True

    def erase(self, bit: int) -> None:
        """Drop the entry at ``bit`` (its position stays a hole until :meth:`update_bits`)."""
        name = self._name_at[bit]
        if name is not None:
            del self._entries[name]
            del self._bit_of[name]
            self._name_at[bit] = None
            self._outdated = True

    def update_bits(self) -> None:
        """Reassign bits by LRU position, least recently used first (every rank alike)."""
        if not self._outdated:
            return
        self._name_at = list[str | None](self._entries)
        self._bit_of = {name: i for i, name in enumerate(self._entries)}
        self._outdated = False
