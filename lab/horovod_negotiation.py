"""Horovod's negotiation, drawn: who sends what to rank 0, and when the response cache answers.

Book chapter 7, "Background-thread architecture" ({ref}`sec-horovod-logic`). This module runs
the real engine's negotiation, :class:`backends.horovod.negotiation.Controller`, for ``p``
ranks in ``p`` threads of this one process, over an in-memory :class:`RecordingChannel` that
does what the engine's gloo channel does (bitwise AND/OR all-reduces, a gather to rank 0, a
broadcast from it) and writes down every message. A scenario says which tensors each rank
submits in each cycle, so that ranks can be ahead of or behind each other; the result is, per
cycle, the bit vectors, the request lists sent to rank 0, the response list it broadcast, and
the fused responses every rank executes.

    records = negotiate(scenario)             # the real Controller, p threads
    print(format_negotiation(records))        # a table
    plot_negotiation(records)                 # a sequence diagram (matplotlib)

Nothing is timed here: this is the protocol, message by message. The cost of a negotiation on
this machine is in :mod:`lab.horovod`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.horovod.messages import ALLREDUCE, Request, RequestList, ResponseList
from backends.horovod.negotiation import (
    BITS_PER_WORD,
    INVALID_IN_QUEUE,
    NUM_STATUS_BITS,
    UNCACHED_IN_QUEUE,
    Controller,
)
from backends.horovod.response_cache import HIT

Submission = tuple[str, int]
"""``(tensor name, number of float32 elements)``."""
Scenario = Sequence[Sequence[Sequence[Submission]]]
"""``scenario[cycle][rank]``: the tensors ``rank`` submits just before ``cycle``."""


@dataclass
class CycleRecord:
    """One cycle of the negotiation, as every rank saw it.

    Attributes:
        cycle: the cycle's number, from 0.
        submitted: per rank, the names it submitted before this cycle.
        hit_bits: per rank, the tensors whose cache bit it set (ready here, cached).
        status: per rank, the status flags it raised (``"miss"``, ``"invalid"``).
        common_hits: the cached tensors whose bit survived the AND (ready everywhere).
        to_coordinator: per rank, the names it sent to rank 0 (``None``: no coordinator
            round this cycle, every rank answered from its cache).
        responses: the fused responses every rank executes, each a list of names.
        identical: whether every rank got the same response list.
    """

    cycle: int
    submitted: list[list[str]]
    hit_bits: list[list[str]] = field(default_factory=list)
    status: list[list[str]] = field(default_factory=list)
    common_hits: list[str] = field(default_factory=list)
    to_coordinator: list[list[str]] | None = None
    responses: list[list[str]] = field(default_factory=list)
    identical: bool = True

    @property
    def coordinator_round(self) -> bool:
        """Whether the requests went to rank 0 this cycle."""
        return self.to_coordinator is not None


class _Shared:
    """What the ``p`` in-memory channels of one negotiation share."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.barrier = threading.Barrier(size, timeout=30)
        self.slots: list[Any] = [None] * size
        self.lock = threading.Lock()
        self.words: dict[int, list[int]] = {}
        self.gathered: dict[int, list[str]] | None = None

    def exchange(self, rank: int, item: Any) -> list[Any]:
        """Every rank deposits ``item``; every rank gets all of them (a barrier on each side,
        so that a slot is not overwritten before everyone has read it)."""
        self.slots[rank] = item
        self.barrier.wait()
        items = list(self.slots)
        self.barrier.wait()
        return items


class RecordingChannel:
    """The engine's :class:`~backends.horovod.messages.ControlChannel`, in memory, for the
    rank ``rank`` of a negotiation run in threads; it records the AND words and the gather."""

    def __init__(self, shared: _Shared, rank: int) -> None:
        self.shared, self.rank = shared, rank

    def bitwise_and(self, words: list[int]) -> list[int]:
        with self.shared.lock:
            self.shared.words[self.rank] = list(words)
        items = self.shared.exchange(self.rank, words)
        out = list(items[0])
        for other in items[1:]:
            out = [a & b for a, b in zip(out, other, strict=True)]
        return out

    def bitwise_or(self, words: list[int]) -> list[int]:
        items = self.shared.exchange(self.rank, words)
        out = list(items[0])
        for other in items[1:]:
            out = [a | b for a, b in zip(out, other, strict=True)]
        return out

    def gather(self, item: RequestList) -> list[RequestList] | None:
        with self.shared.lock:
            if self.shared.gathered is None:
                self.shared.gathered = {}
            self.shared.gathered[self.rank] = [r.name for r in item.requests]
        items = self.shared.exchange(self.rank, item)
        return items if self.rank == 0 else None

    def broadcast(self, item: ResponseList | None) -> ResponseList:
        items = self.shared.exchange(self.rank, item)
        root = items[0]
        assert isinstance(root, ResponseList)
        return root


def _bits(words: Sequence[int]) -> set[int]:
    """Bit positions set in int64 words of 63 bits each (the engine's layout)."""
    return {i * BITS_PER_WORD + b for i, w in enumerate(words) for b in range(BITS_PER_WORD)
            if w >> b & 1}


def negotiate(scenario: Scenario, fusion_threshold_bytes: int = 64 * 2**20,
              cache_capacity: int = 1024) -> list[CycleRecord]:
    """Run the engine's :class:`Controller` on ``len(scenario[0])`` ranks for every cycle of
    ``scenario``; a request not agreed on in its cycle is carried over, as the engine does.

    Args:
        scenario: ``scenario[cycle][rank]`` = the ``(name, numel)`` submitted before ``cycle``.
        fusion_threshold_bytes: the fusion threshold, bytes.
        cache_capacity: response-cache entries (0: every cycle goes through rank 0).

    Returns:
        One :class:`CycleRecord` per cycle.
    """
    size = len(scenario[0]) if scenario else 0
    if size < 1 or any(len(cycle) != size for cycle in scenario):
        raise ValueError("every cycle of the scenario needs one list of tensors per rank")
    shared = _Shared(size)
    controllers = [Controller(r, size, RecordingChannel(shared, r), fusion_threshold_bytes,
                              cache_capacity, stall_check_s=1e9, stall_shutdown_s=0,
                              clock=lambda: 0.0) for r in range(size)]
    pending: list[list[Request]] = [[] for _ in range(size)]
    errors: list[BaseException] = []
    records: list[CycleRecord] = []

    for k, cycle in enumerate(scenario):
        for r in range(size):
            pending[r] += [Request(name, r, ALLREDUCE, "float32", (numel,))
                           for name, numel in cycle[r]]
        # bit positions of this cycle: the caches' (identical) order before it
        bit_name = {ctl.cache.bit(req.name): req.name
                    for ctl, reqs in zip(controllers, pending, strict=True)
                    for req in reqs if ctl.cache.cached(req) == HIT}
        results: list[ResponseList | None] = [None] * size
        shared.words.clear()
        shared.gathered = None

        def run(rank: int, results: list[ResponseList | None] = results) -> None:
            try:
                result, carry = controllers[rank].compute_response_list(pending[rank], False)
                pending[rank] = carry
                results[rank] = result
            except BaseException as exc:  # re-raised below, once every thread has stopped
                errors.append(exc)
                shared.barrier.abort()

        threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        record = CycleRecord(k, [[name for name, _ in cycle[r]] for r in range(size)])
        words = [shared.words.get(r) for r in range(size)]
        for w in words:
            mine = _bits(w or [])
            record.hit_bits.append(sorted(bit_name[b - NUM_STATUS_BITS] for b in mine
                                          if b - NUM_STATUS_BITS in bit_name))
            record.status.append([flag for flag, bit in (("miss", UNCACHED_IN_QUEUE),
                                                         ("invalid", INVALID_IN_QUEUE))
                                  if w is not None and bit not in mine])
        if all(w is not None for w in words):
            common = set.intersection(*(_bits(w or []) for w in words))
            record.common_hits = sorted(bit_name[b - NUM_STATUS_BITS] for b in common
                                        if b - NUM_STATUS_BITS in bit_name)
        if shared.gathered is not None:
            record.to_coordinator = [shared.gathered.get(r, []) for r in range(size)]
        lists = [[list(resp.names) for resp in res.responses] if res else [] for res in results]
        record.responses = lists[0]
        record.identical = all(x == lists[0] for x in lists)
        records.append(record)
    return records


def training_steps(layers: Sequence[tuple[str, int]], ranks: int, steps: int = 2,
                   lag: Sequence[int] | None = None, per_cycle: int = 2) -> list[list[list[
                       Submission]]]:
    """A scenario: ``steps`` backward passes of a model whose parameters are ``layers``
    (``(name, numel)``, forward order). Each backward submits the gradients last layer first,
    ``per_cycle`` per cycle; rank ``r`` starts every backward ``lag[r]`` cycles late (a
    straggler). One empty cycle ends each step."""
    lag = list(lag) if lag is not None else [0] * ranks
    grads = list(reversed(layers))
    scenario: list[list[list[Submission]]] = []
    for _ in range(steps):
        delays = lag
        length = max(delays) + -(-len(grads) // per_cycle) + 1
        cycles: list[list[list[Submission]]] = [[[] for _ in range(ranks)]
                                                for _ in range(length)]
        for r in range(ranks):
            for i, grad in enumerate(grads):
                cycles[delays[r] + i // per_cycle][r].append(grad)
        scenario += cycles
    return scenario


def format_negotiation(records: Sequence[CycleRecord]) -> str:
    """One block of lines per cycle: what each rank sent, and the responses."""
    lines = []
    for rec in records:
        how = "coordinator (rank 0)" if rec.coordinator_round else "response cache only"
        lines.append(f"cycle {rec.cycle}: {how}")
        for r, sub in enumerate(rec.submitted):
            sent = ("" if rec.to_coordinator is None
                    else f"; to rank 0: {rec.to_coordinator[r] or '[] (nothing new)'}")
            flags = f" flags {rec.status[r]}" if rec.status and rec.status[r] else ""
            hits = rec.hit_bits[r] if rec.hit_bits else []
            lines.append(f"  rank {r}: submitted {sub or '-'}; cache bits {hits or '-'}"
                         f"{flags}{sent}")
        if rec.common_hits:
            lines.append(f"  AND of the bit vectors: ready everywhere {rec.common_hits}")
        lines.append(f"  responses (fused): {rec.responses or '-'}"
                     + ("" if rec.identical else "  (ranks disagree!)"))
    return "\n".join(lines)


def plot_negotiation(records: Sequence[CycleRecord], ax: Any = None,
                     title: str = "negotiation, cycle by cycle") -> Any:
    """A sequence diagram: a row per rank, a column per cycle. In a coordinator round, arrows
    carry each rank's request list to rank 0 and the fused response list back; in a cached
    cycle, a band marks the bit-vector AND. Below each column, the responses executed."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    size = len(records[0].submitted)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(records)), 1.0 + 0.8 * size))
    for r in range(size):
        ax.axhline(r, color="0.85", lw=1, zorder=0)
    for rec in records:
        x = rec.cycle
        for r, sub in enumerate(rec.submitted):
            if sub:
                ax.plot(x - 0.35, r, "o", color="C2", ms=4)
                ax.annotate(str(len(sub)), (x - 0.35, r), xytext=(-9, 3),
                            textcoords="offset points", fontsize=6, color="C2")
        if rec.coordinator_round:
            assert rec.to_coordinator is not None
            for r in range(1, size):
                ax.annotate("", xy=(x - 0.05, 0), xytext=(x - 0.25, r),
                            arrowprops={"arrowstyle": "->", "color": "C0", "lw": 1})
                ax.annotate(str(len(rec.to_coordinator[r])), (x - 0.2, r - 0.3), fontsize=6,
                            color="C0")
                ax.annotate("", xy=(x + 0.25, r), xytext=(x + 0.05, 0),
                            arrowprops={"arrowstyle": "->", "color": "C1", "lw": 1})
        else:
            ax.add_patch(Rectangle((x - 0.2, -0.3), 0.4, size - 0.4, color="C4",
                                       alpha=0.25, lw=0))
            ax.text(x, size - 0.55, "AND", ha="center", fontsize=6, color="C4")
        label = "\n".join("+".join(n.split(".")[-2] + "." + n.split(".")[-1]
                                   if n.count(".") >= 1 else n for n in group)
                          for group in rec.responses) or "-"
        ax.text(x, size - 0.25 + 0.02, label, ha="center", va="top", fontsize=5.5)
    ax.set_yticks(range(size), [f"rank {r}" for r in range(size)])
    ax.set_xticks(range(len(records)), [f"c{rec.cycle}" for rec in records])
    ax.set_ylim(size + 0.9, -0.6)
    ax.set_xlim(-0.6, len(records) - 0.4)
    ax.set_title(title + "  (green: tensors submitted; blue: request lists to rank 0; orange: "
                 "response list; purple: cache bit vectors AND-ed; text: fused responses)",
                 fontsize=7)
    return ax
