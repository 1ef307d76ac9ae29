"""Negotiation: which requested tensors are ready on every rank, agreed once per cycle.

Book chapter 7, "Background-thread architecture"; Sergeev & Del Balso (2018). Re-implemented
after reading Horovod's ``horovod/common/controller.cc`` (``ComputeResponseList``,
``ConstructResponse``, ``IncrementTensorCount``), ``response_cache.cc`` (``ResponseCache``,
``CacheCoordinator``), ``stall_inspector.cc`` and ``message.h``; no code is taken from them.

Every cycle, on every rank, :meth:`Controller.compute_response_list`:

1. classifies each new :class:`Request` against the :class:`ResponseCache`: a **hit** (same
   name, dtype and shape cached), an **invalid** entry (name cached, shape or dtype changed) or
   a **miss**;
2. all-reduces a bit vector with bitwise AND: a hit bit per cached tensor this rank has ready,
   plus status bits stored inverted (*no* miss here, *no* invalid entry here, *not* shutting
   down), so one AND tells every rank which cached tensors are ready everywhere and whether any
   rank has a miss; a second all-reduce, a bitwise OR, spreads invalid bits so every rank drops
   the same entries;
3. if nobody has a miss: the responses are the common hits, from each rank's own cache copy,
   in bit order (least recently used first), with no message to the coordinator;
4. otherwise the **coordinator** protocol: every rank sends its uncached requests to rank 0
   (a gather of :class:`RequestList`); rank 0 counts them in its **message table**; a name with
   one request per rank is ready and becomes a :class:`Response` (or an error response when the
   ranks disagree on operation, dtype, shape or root); rank 0 fuses the common hits and the new
   responses (:func:`backends.horovod.fusion.fuse`) and broadcasts the :class:`ResponseList`;
   every rank then inserts those responses into its cache in the same order, so the caches stay
   identical.

The **stall inspector** lives on rank 0: a name that some ranks submitted and others did not
for ``stall_check_s`` is logged once, naming the ranks that did not submit it; after
``stall_shutdown_s`` it becomes an error response that fails the handles of the ranks that did.
A cached tensor that waits locally longer than ``stall_check_s`` is invalidated, so that it goes
through the coordinator, which can name the missing ranks.

The communication is abstract (:class:`ControlChannel`): the engine passes one built on a gloo
process group used only by the background thread. The messages are in
:mod:`backends.horovod.messages`, the cache in :mod:`backends.horovod.response_cache`; this
module is the controller, its bit vector and the stall inspector.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backends.horovod.fusion import fuse
from backends.horovod.messages import (
    ALLREDUCE,
    ERROR,
    ControlChannel,
    Request,
    RequestList,
    Response,
    ResponseList,
)
from backends.horovod.response_cache import HIT, INVALID, ResponseCache

log = logging.getLogger("backends.horovod")

BITS_PER_WORD = 63
"""Bits used per int64 word of the bit vector (63, so every word stays a positive int64)."""

SHOULD_SHUT_DOWN, UNCACHED_IN_QUEUE, INVALID_IN_QUEUE = 0, 1, 2
NUM_STATUS_BITS = 3
"""Status bits at the front of the bit vector, each stored inverted (set = "no")."""


def _to_words(bits: Sequence[int], nbits: int) -> list[int]:
    words = [0] * max(1, -(-nbits // BITS_PER_WORD))
    for b in bits:
        words[b // BITS_PER_WORD] |= 1 << (b % BITS_PER_WORD)
    return words


def _from_words(words: Sequence[int]) -> set[int]:
    out = set()
    for i, w in enumerate(words):
        while w:
            low = w & -w
            out.add(i * BITS_PER_WORD + low.bit_length() - 1)
            w ^= low
    return out


@dataclass
class StallRecord:
    """Rank 0's view of one uncached name waiting in the message table."""

    first_seen: float
    warned: bool = False


class Controller:
    """One rank's side of the negotiation (rank 0 is also the coordinator).

    Args:
        rank: this rank (in the Horovod world).
        size: ranks in the world.
        channel: the negotiation's messages.
        fusion_threshold_bytes: the (effective) fusion threshold, bytes.
        cache_capacity: response-cache entries (0: no cache).
        stall_check_s: warn about a tensor missing on some ranks after this long, s.
        stall_shutdown_s: turn it into an error after this long, s (0: never).
        clock: seconds, monotonic (a parameter for tests).
    """

    def __init__(self, rank: int, size: int, channel: ControlChannel,
                 fusion_threshold_bytes: int, cache_capacity: int = 1024,
                 stall_check_s: float = 5.0, stall_shutdown_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rank, self.size, self.channel = rank, size, channel
        self.threshold = fusion_threshold_bytes
        self.cache = ResponseCache(cache_capacity)
        self.stall_check_s, self.stall_shutdown_s = stall_check_s, stall_shutdown_s
        self.clock = clock
        self.message_table: dict[str, list[Request]] = {}
        self.stalls: dict[str, StallRecord] = {}
        self.cached_waiting: dict[str, float] = {}  # name -> when first seen as a pending hit
        self.shapes: dict[str, tuple[int, ...]] = {}  # this rank's pending requests
        self.coordinator_rounds = 0
        self.cache_hits = 0

    def compute_response_list(self, requests: list[Request], shutdown: bool
                              ) -> tuple[ResponseList, list[Request]]:
        """One cycle's negotiation.

        Args:
            requests: this rank's requests not yet agreed on (new and carried over).
            shutdown: this rank wants to stop.

        Returns:
            The agreed response list (identical on every rank) and the requests to carry over
            to the next cycle (cache hits not yet ready on every rank).
        """
        use_cache = self.cache.capacity > 0
        hits: set[int] = set()
        invalid: set[int] = set()
        uncached = False
        now = self.clock()
        for req in requests:
            self.shapes[req.name] = req.shape
        stall_errors_due = self.rank == 0 and self._warn_stalls(now)
        if use_cache:
            for req in requests:
                state = self.cache.cached(req)
                if state == HIT:
                    bit = self.cache.bit(req.name)
                    since = self.cached_waiting.setdefault(req.name, now)
                    if now - since > self.stall_check_s:  # stalled: renegotiate, to name ranks
                        invalid.add(bit)
                        uncached = True
                    else:
                        hits.add(bit)
                else:
                    if state == INVALID:
                        invalid.add(self.cache.bit(req.name))
                    uncached = True
            hits -= invalid
            uncached = uncached or stall_errors_due  # rank 0 must send error responses
            status = [b for b, flag in ((SHOULD_SHUT_DOWN, shutdown),
                                        (UNCACHED_IN_QUEUE, uncached),
                                        (INVALID_IN_QUEUE, bool(invalid))) if not flag]
            nbits = NUM_STATUS_BITS + self.cache.num_active_bits
            common = _from_words(self.channel.bitwise_and(
                _to_words(status + [NUM_STATUS_BITS + b for b in hits], nbits)))
            shutdown = SHOULD_SHUT_DOWN not in common
            uncached = UNCACHED_IN_QUEUE not in common
            any_invalid = INVALID_IN_QUEUE not in common
            hits = {b - NUM_STATUS_BITS for b in common if b >= NUM_STATUS_BITS}
            if any_invalid:
                gone = _from_words(self.channel.bitwise_or(
                    _to_words(sorted(invalid), self.cache.num_active_bits)))
                for bit in gone:
                    self.cache.erase(bit)
            carry: list[Request] = []
            new: list[Request] = []
            for req in requests:
                if self.cache.cached(req) == HIT:
                    if self.cache.bit(req.name) in hits:
                        self.cached_waiting.pop(req.name, None)
                    else:
                        carry.append(req)
                else:
                    self.cached_waiting.pop(req.name, None)
                    new.append(req)
            self.cache_hits += len(hits)
            if not uncached:
                responses = [self.cache.get(b) for b in sorted(hits)]
                result = ResponseList(self._fuse(responses), shutdown)
                self.cache.update_bits()
                self._forget(result)
                return result, carry
        else:
            new, carry, hits = list(requests), [], set()
        result = self._coordinate(new, sorted(hits), shutdown)
        if use_cache:
            for response in result.responses:
                if response.op == ALLREDUCE:
                    self.cache.put(response, self.shapes)
            self.cache.update_bits()
        self._forget(result)
        return result, carry

    def _forget(self, result: ResponseList) -> None:
        for response in result.responses:
            for name in response.names:
                self.shapes.pop(name, None)

    def _coordinate(self, new: list[Request], hit_bits: list[int],
                    shutdown: bool) -> ResponseList:
        """The coordinator protocol: requests to rank 0, the fused response list back."""
        self.coordinator_rounds += 1
        gathered = self.channel.gather(RequestList(new, shutdown))
        if self.rank != 0:
            return self.channel.broadcast(None)
        assert gathered is not None
        now = self.clock()
        ready: list[str] = []
        for rank_list in gathered:
            shutdown = shutdown or rank_list.shutdown
            for req in rank_list.requests:
                entry = self.message_table.setdefault(req.name, [])
                entry.append(req)
                self.stalls.setdefault(req.name, StallRecord(now))
                if len(entry) == self.size:
                    ready.append(req.name)
        responses = [self.cache.peek(b) for b in hit_bits]
        responses += [self._construct_response(name) for name in ready]
        responses += self._stall_errors(now)
        result = ResponseList(self._fuse(responses), shutdown)
        return self.channel.broadcast(result)

    def _construct_response(self, name: str) -> Response:
        """Check that every rank asked for the same thing; one response (maybe an error)."""
        reqs = self.message_table.pop(name)
        self.stalls.pop(name, None)
        first = reqs[0]
        problem = ""
        for r in reqs[1:]:
            if r.op != first.op:
                problem = f"mismatched operations: rank {first.rank} did {first.op}, rank " \
                          f"{r.rank} did {r.op}"
            elif r.dtype != first.dtype:
                problem = f"mismatched dtypes: rank {first.rank} sent {first.dtype}, rank " \
                          f"{r.rank} sent {r.dtype}"
            elif r.shape != first.shape:
                problem = f"mismatched shapes: rank {first.rank} sent {list(first.shape)}, " \
                          f"rank {r.rank} sent {list(r.shape)}"
            elif r.reduce_op != first.reduce_op:
                problem = f"mismatched reductions: rank {first.rank} asked {first.reduce_op}, " \
                          f"rank {r.rank} asked {r.reduce_op}"
            elif r.root_rank != first.root_rank:
                problem = f"mismatched root ranks: rank {first.rank} named {first.root_rank}, " \
                          f"rank {r.rank} named {r.root_rank}"
            if problem:
                break
        if problem:
            return Response(ERROR, [name], error=f"tensor {name!r}: {problem}")
        itemsize = _itemsize(first.dtype)
        return Response(first.op, [name], [first.numel], first.dtype, first.reduce_op,
                        first.root_rank, itemsize=itemsize)

    def _who(self, name: str) -> tuple[list[int], list[int]]:
        have = sorted(r.rank for r in self.message_table.get(name, []))
        return have, sorted(set(range(self.size)) - set(have))

    def _warn_stalls(self, now: float) -> bool:
        """Rank 0, every cycle: log tensors missing on some ranks for ``stall_check_s``
        (once each); True if some are due to become errors (a coordinator round is needed)."""
        due = False
        for name, record in self.stalls.items():
            age = now - record.first_seen
            if age > self.stall_check_s and not record.warned:
                record.warned = True
                have, missing = self._who(name)
                log.warning("stalled tensor %r: submitted by ranks %s, not by ranks %s for "
                            "%.1f s (one of them is behind, or submits a different name)",
                            name, have, missing, age)
            due = due or (self.stall_shutdown_s > 0 and age > self.stall_shutdown_s)
        return due

    def _stall_errors(self, now: float) -> list[Response]:
        """Rank 0: error responses for tensors stalled longer than ``stall_shutdown_s``."""
        errors = []
        for name, record in list(self.stalls.items()):
            if self.stall_shutdown_s > 0 and now - record.first_seen > self.stall_shutdown_s:
                have, missing = self._who(name)
                del self.message_table[name]
                del self.stalls[name]
                errors.append(Response(ERROR, [name], error=(
                    f"tensor {name!r} was submitted by ranks {have} but not by ranks "
                    f"{missing} within {self.stall_shutdown_s:g} s "
                    "(HOROVOD_STALL_SHUTDOWN_TIME_SECONDS)")))
        return errors

    def _fuse(self, responses: list[Response]) -> list[Response]:
        groups = fuse(responses, self.threshold,
                      key=lambda r: (r.dtype, r.reduce_op), nbytes=lambda r: r.nbytes,
                      fusible=lambda r: r.op == ALLREDUCE)
        fused = []
        for group in groups:
            head = group[0]
            fused.append(Response(head.op, [n for r in group for n in r.names],
                                  [k for r in group for k in r.numels], head.dtype,
                                  head.reduce_op, head.root_rank, head.error, head.itemsize))
        return fused


def _itemsize(dtype: str) -> int:
    import torch

    return int(torch.empty((), dtype=getattr(torch, dtype)).element_size())
