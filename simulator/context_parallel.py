"""Context parallelism simulated: ring attention and DeepSpeed Ulysses, one training step of
attention (forward and backward) on ``p`` ranks that each hold ``S/p`` tokens (book
chapter 21). Twin of :mod:`backends.context_parallel`; pure Python.

**Ring attention** (Liu, Zaharia & Abbeel 2023, "Ring Attention with Blockwise Transformers",
§3 and its Table 1). Each rank keeps its queries; the key/value blocks (``M`` bytes each:
:func:`kv_block_bytes`) go round the ring, each transfer posted before the block in hand is
computed, so a step takes ``max(C_s, α + M·β)``. Forward and backward::

    T_fwd = Σ_{s<p−1} max(C_s, α + M·β) + C_{p−1}
    T_bwd = Δ + Σ_{s<p−1} max(C'_s, α + 2M·β) + C'_{p−1} + (α + M·β)

the backward's blocks travel with their running ``dk, dv`` (another ``M`` bytes a step on
the same link, the last hop bringing each home). Liu et al.'s condition for hiding the
ring, ``C ≥ M·β``, becomes a block of at least ``F/B`` tokens (FLOP/s over bytes/s). Per
rank it sends
``(3p − 2)·M`` bytes a step (:func:`ring_traffic_bytes`).

**Causal masking, zig-zag** (Brandon et al. 2023, "Striped Attention", §3; Llama 3 team
2024, §3.3.2): with the sequence in ``2p`` chunks and rank ``r`` holding chunks ``r`` and
``2p−1−r``, step 0 (its own keys) costs 3 of 4 ``c × c`` sub-blocks and every other step 2
of 4 on every rank (:data:`STEP_WORK`, :func:`step_kind`) — balanced, unlike a contiguous
split whose last rank does ``p`` times the first's work.

**Ulysses** (Jacobs et al. 2023, "DeepSpeed Ulysses", §3.1): an all-to-all of ``q, k, v``
from sequence to head sharding, local attention over ``H/p`` heads of all ``S`` tokens, an
all-to-all of the output back; the backward the same in reverse. Each all-to-all of ``n``
bytes per rank costs ``(p−1)·α + n·(p−1)/p·β`` (pairwise,
:func:`~simulator.collectives.all_to_all.pairwise_all_to_all_cost`), and with ``A`` the
bytes of one of a rank's ``q, k, v`` the step moves ``3A, A`` forward and ``A, 3A`` back:
``8A·(p−1)/p`` per rank (:func:`ulysses_traffic_bytes`) — constant in ``p`` for a fixed
``S/p``, Jacobs et al.'s point.

Compute times ``C_s`` come from a one-process profile of the very step (lab side);
:func:`attention_flops` gives the FLOPs from shapes. Times are seconds, sizes bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from simulator.collectives.all_to_all import pairwise_all_to_all, pairwise_all_to_all_cost
from simulator.core.comm import SimComm, SimGen, SimResult, SimWork, run_spmd
from simulator.core.cores import CorePool, spend
from simulator.core.hardware import Cluster

SCHEMES = ("ring", "ulysses")
KV_TAG, GRAD_TAG = 21, 22
"""The real twin's message tags (key/value blocks, their gradients' running sums)."""

STEP_WORK = {"full": 4, "diagonal": 3, "earlier": 2, "later": 2}
"""``c × c`` sub-blocks a ring step computes, by :func:`step_kind` (a ``2c × 2c`` block is 4)."""


@dataclass(frozen=True)
class AttentionShape:
    """The whole sequence's attention: ``batch × heads × seq`` tokens of ``dim`` features,
    ``itemsize`` bytes an element, causal or not."""

    batch: int
    heads: int
    seq: int
    dim: int
    causal: bool = False
    itemsize: int = 4

    def shard_bytes(self, p: int) -> int:
        """``A``: bytes of one of a rank's ``q, k, v`` (``S/p`` tokens)."""
        return self.batch * self.heads * (self.seq // p) * self.dim * self.itemsize


def check(shape: AttentionShape, p: int, scheme: str) -> None:
    """A clear error where ``scheme`` cannot split ``shape`` over ``p`` ranks."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; choose ring or ulysses")
    if p < 1:
        raise ValueError(f"world must be at least 1, got {p}")
    if scheme == "ring" and shape.seq % (2 * p):
        raise ValueError(f"ring attention needs seq divisible by 2·world = {2 * p}, "
                         f"got {shape.seq}")
    if scheme == "ulysses" and (shape.heads % p or shape.seq % p):
        raise ValueError(f"Ulysses needs heads and seq divisible by world = {p}, got "
                         f"{shape.heads} heads and {shape.seq} tokens")


def step_kind(rank: int, source: int, causal: bool) -> str:
    """A ring step's kind by whose keys rank ``rank`` holds: ``full`` (not causal), else
    ``diagonal`` (its own), ``earlier`` (a lower rank's) or ``later`` (a higher rank's)."""
    if not causal:
        return "full"
    if source == rank:
        return "diagonal"
    return "earlier" if source < rank else "later"


def ring_kinds(rank: int, p: int, causal: bool) -> list[str]:
    """The kinds of rank ``rank``'s ``p`` steps (step ``s`` holds rank ``r − s``'s keys)."""
    return [step_kind(rank, (rank - s) % p, causal) for s in range(p)]


def attention_flops(rows: int, cols: int, shape: AttentionShape) -> tuple[float, float]:
    """FLOPs of attention of ``rows`` queries over ``cols`` keys on every batch and head:
    forward ``q·kᵀ`` and ``P·v`` (2 matmuls, ``4·B·H·rows·cols·dim``), backward five (scores
    recomputed, ``dv``, ``dP``, ``dq``, ``dk``: ``10·B·H·rows·cols·dim``)."""
    base = 2.0 * shape.batch * shape.heads * rows * cols * shape.dim
    return 2 * base, 5 * base


def ring_step_flops(shape: AttentionShape, p: int, kind: str) -> tuple[float, float]:
    """Forward and backward FLOPs of one ring step of ``kind`` (``c = S/2p``)."""
    c = shape.seq // (2 * p)
    fwd, bwd = attention_flops(c, c, shape)
    return STEP_WORK[kind] * fwd, STEP_WORK[kind] * bwd


def kv_block_bytes(shape: AttentionShape, p: int) -> int:
    """``M``: one rank's keys and values (or their gradients), bytes — one ring message."""
    return 2 * shape.shard_bytes(p)


def ring_traffic_bytes(shape: AttentionShape, p: int) -> int:
    """Bytes a rank sends per step of ring attention: ``(p−1)·M`` forward,
    ``(p−1)·M + p·M`` backward (0 alone)."""
    return (3 * p - 2) * kv_block_bytes(shape, p) if p > 1 else 0


def ulysses_traffic_bytes(shape: AttentionShape, p: int) -> int:
    """Bytes a rank sends per step of Ulysses: ``8A·(p−1)/p``."""
    return 8 * shape.shard_bytes(p) * (p - 1) // p


def ring_activation_bytes(shape: AttentionShape, p: int) -> int:
    """Most bytes of attention tensors a rank of the ring holds, forward: its ``q, k, v`` and
    output (``4A``), the block in hand and the one arriving (``2M``), the log-sum-exp, and the
    largest piece's two score matrices (``2c × 2c`` unmasked, ``2c × c`` causal)."""
    c, a = shape.seq // (2 * p), shape.shard_bytes(p)
    cols = c if shape.causal else 2 * c
    scores = 2 * shape.batch * shape.heads * 2 * c * cols * shape.itemsize
    lse = shape.batch * shape.heads * 2 * c * shape.itemsize
    return 4 * a + 2 * kv_block_bytes(shape, p) + lse + scores


def ulysses_activation_bytes(shape: AttentionShape, p: int) -> int:
    """Most bytes of attention tensors a rank of Ulysses holds, forward: its ``q, k, v`` and
    output (``4A``), the head-sharded ``q, k, v`` and output kept for backward (``4A`` —
    ``H/p`` heads of ``S`` tokens is as many elements as ``H`` heads of ``S/p``), and the
    first all-to-all's send and receive buffers (``6A``); the local kernel's tiles are not
    counted."""
    return 14 * shape.shard_bytes(p)


@dataclass(frozen=True)
class StepCosts:
    """One-core seconds of the compute in one step: per ring step kind (or ``"local"`` for
    Ulysses' attention), forward and backward; ``prologue_s``: the backward's
    ``Δ = rowsum(dO ∘ O)`` (ring)."""

    forward_s: Mapping[str, float]
    backward_s: Mapping[str, float]
    prologue_s: float = 0.0


def _compute(comm: SimComm, shared: dict[str, object], seconds: float, name: str) -> SimGen:
    cores = shared["cores"]
    assert isinstance(cores, float | int)
    pool = None
    if not math.isinf(cores):
        made = shared.setdefault("pool", CorePool(comm.env, float(cores)))
        assert isinstance(made, CorePool)
        pool = made
    yield from spend(comm, seconds, name, pool)


def ring_step(comm: SimComm, shape: AttentionShape, costs: StepCosts,
              shared: dict[str, object]) -> SimGen:
    """Rank program of one step of :mod:`backends.context_parallel.ring`, in its order:
    forward ``p`` steps (transfer posted, block computed, transfer waited), then ``Δ`` and
    the backward ``p`` steps (the running ``dk, dv`` received, added, passed on), then the
    last hop home."""
    p, r = comm.world_size, comm.rank
    nxt, prv, m = (r + 1) % p, (r - 1) % p, kv_block_bytes(shape, p)
    kinds = ring_kinds(r, p, shape.causal)
    comm.alloc(ring_activation_bytes(shape, p))
    for s, kind in enumerate(kinds):
        moving = ((comm.irecv(prv, m, KV_TAG), comm.isend(nxt, m, KV_TAG))
                  if s < p - 1 else ())
        yield from _compute(comm, shared, costs.forward_s[kind], f"forward {s}")
        for work in moving:
            yield work.wait()
    yield from _compute(comm, shared, costs.prologue_s, "delta")
    sends: list[SimWork] = []
    for s, kind in enumerate(kinds):
        moving = ((comm.irecv(prv, m, KV_TAG), comm.isend(nxt, m, KV_TAG))
                  if s < p - 1 else ())
        arriving = comm.irecv(prv, m, GRAD_TAG) if s > 0 else None
        yield from _compute(comm, shared, costs.backward_s[kind], f"backward {s}")
        if arriving is not None:
            yield arriving.wait()
            yield from comm.reduce(m, "dk, dv")
        if p > 1:
            sends.append(comm.isend(nxt, m, GRAD_TAG))
        for work in moving:
            yield work.wait()
    if p > 1:
        yield comm.irecv(prv, m, GRAD_TAG).wait()
    for work in sends:
        yield work.wait()
    comm.free(ring_activation_bytes(shape, p))


def ulysses_step(comm: SimComm, shape: AttentionShape, costs: StepCosts,
                 shared: dict[str, object]) -> SimGen:
    """Rank program of one step of :mod:`backends.context_parallel.ulysses`: all-to-all of
    ``q, k, v`` (``3A``, packed and unpacked: a copy each way), local attention, all-to-all
    of the output (``A``); backward the same in reverse."""
    a, size = shape.shard_bytes(comm.world_size), shape.itemsize
    comm.alloc(ulysses_activation_bytes(shape, comm.world_size))
    for nbytes, phase in ((3 * a, None), (a, "forward"), (a, None), (3 * a, "backward")):
        if phase == "backward":
            yield from _compute(comm, shared, costs.backward_s["local"], "local backward")
        yield from comm.memcpy(nbytes, "pack")
        yield from pairwise_all_to_all(comm, nbytes, size)
        yield from comm.memcpy(nbytes, "unpack")
        if phase is None and nbytes == 3 * a:
            yield from _compute(comm, shared, costs.forward_s["local"], "local forward")
    comm.free(ulysses_activation_bytes(shape, comm.world_size))


def simulate_context_parallel(cluster: Cluster, scheme: str, shape: AttentionShape,
                              costs: StepCosts, cores: float = math.inf,
                              trace: bool = True) -> SimResult:
    """One step of ``scheme`` on ``cluster``: makespan, the trace and each rank's peak of the
    activation bytes above. ``cores``: CPU cores the ranks share (``math.inf``: one each)."""
    check(shape, cluster.world_size, scheme)
    program = ring_step if scheme == "ring" else ulysses_step
    return run_spmd(cluster, program, shape, costs, {"cores": cores}, trace=trace)


def ring_closed_form_s(shape: AttentionShape, p: int, costs: StepCosts, alpha_s: float,
                       beta_s_per_B: float) -> float:
    """``T_fwd + T_bwd`` of the module docstring for the slowest rank (eager sends, a core
    per rank, one link per neighbour, the ``dk, dv`` addition not counted), s."""
    m = kv_block_bytes(shape, p)
    hop = alpha_s + m * beta_s_per_B if p > 1 else 0.0
    both = alpha_s + 2 * m * beta_s_per_B if p > 1 else 0.0

    def one(costs_of: Mapping[str, float], kinds: list[str], wait: float) -> float:
        return math.fsum(max(costs_of[k], wait) for k in kinds[:-1]) + costs_of[kinds[-1]]

    return max(one(costs.forward_s, ring_kinds(r, p, shape.causal), hop) + costs.prologue_s
               + one(costs.backward_s, ring_kinds(r, p, shape.causal), both) + hop
               for r in range(p))


def ulysses_closed_form_s(shape: AttentionShape, p: int, costs: StepCosts, alpha_s: float,
                          beta_s_per_B: float, memcpy_Bps: float = math.inf) -> float:
    """Four pairwise all-to-alls (``3A, A, A, 3A``), each packed and unpacked, and the local
    attention forward and backward, s."""
    a = shape.shard_bytes(p)
    moves = math.fsum(pairwise_all_to_all_cost(p, n, alpha_s, beta_s_per_B) + 2 * n / memcpy_Bps
                      for n in (3 * a, a, a, 3 * a))
    return moves + costs.forward_s["local"] + costs.backward_s["local"]
