"""RPC model parallelism on the cluster model: the messages of one training step of a split model.

Twin of :mod:`backends.rpc` (book chapter 13). A driver (rank 0) holds a model split into ``k``
stages on workers ``1 … k`` through RRefs and trains it with distributed autograd and the
distributed optimizer. Every RPC is a request and a response, each a message of ``α + n·β``
(α includes the RPC layer's own overhead: pickling, the agent's threads — calibrate it with an
RPC echo, :func:`lab.rpc.calibrate_rpc`, not with the process group's ping-pong). One step:

* **forward** — for each stage ``i``: request (the activation ``a_{i−1}``) driver → worker,
  forward compute, response (``a_i``) worker → driver;
* **backward** (distributed autograd, FAST mode) — the driver's engine reaches the ``recv``
  function of stage ``k``'s output and sends its gradient to worker ``k`` (a
  *propagate-gradients* request); worker ``k`` runs its backward and, reaching the ``recv`` of
  its input, sends that gradient back to the driver, whose engine forwards it to worker
  ``k − 1``, …; stage 1's input needs no gradient. Each propagate request is answered only
  when the receiver's whole part — nested requests included — is done, so the acknowledgements
  unwind the chain: ``2k − 1`` gradient messages and as many acknowledgements, all serial;
* **optimizer** — ``DistributedOptimizer.step`` asks every worker at once to step its local
  optimizer (request, update, response), and waits for all.

:func:`split_step_cost` is the closed form of that chain; :func:`simulate_split_step` plays it
on a cluster (contention and topology included) and equals the closed form on a fully connected
network without contention (tested). Seconds and bytes throughout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulator.core.comm import SimComm, SimGen, SimResult, run_spmd
from simulator.core.hardware import Cluster

ACK_BYTES = 0
"""Payload of an acknowledgement (a propagate-gradients or optimizer-step response), bytes:
nothing but the RPC envelope, whose cost is in α."""


@dataclass(frozen=True)
class StageCost:
    """One stage of the split model (one-core seconds, measured on one process or modelled).

    Attributes:
        forward_s: forward compute, s.
        backward_s: backward compute, s.
        update_s: its optimizer step, s.
        input_bytes: the activation it receives (and, from stage 2 on, the gradient it
            returns), bytes.
        output_bytes: the activation it returns (and the gradient it receives), bytes.
    """

    forward_s: float
    backward_s: float
    update_s: float
    input_bytes: int
    output_bytes: int


def _message(comm: SimComm, src: int, dst: int, nbytes: int, tag: int) -> SimGen:
    if comm.rank == src:
        yield from comm.send(dst, nbytes, tag)
    elif comm.rank == dst:
        yield from comm.recv(src, nbytes, tag)


def _compute(comm: SimComm, rank: int, seconds: float, name: str) -> SimGen:
    if comm.rank == rank:
        start = comm.now
        yield comm.env.timeout(seconds)
        comm.span("compute", name, start)


def split_step(comm: SimComm, stages: Sequence[StageCost], loss_s: float = 0.0) -> SimGen:
    """Rank program of one training step: driver 0, stage ``i`` on rank ``i + 1``."""
    tag = 0

    def msg(src: int, dst: int, nbytes: int) -> SimGen:
        nonlocal tag
        tag += 1
        yield from _message(comm, src, dst, nbytes, tag)

    k = len(stages)
    for i, st in enumerate(stages):  # forward: rpc_sync per stage
        yield from msg(0, i + 1, st.input_bytes)
        yield from _compute(comm, i + 1, st.forward_s, f"forward {i}")
        yield from msg(i + 1, 0, st.output_bytes)
    yield from _compute(comm, 0, loss_s, "loss")
    for i in reversed(range(k)):  # backward: the propagate-gradients chain, driver ↔ workers
        yield from msg(0, i + 1, stages[i].output_bytes)
        yield from _compute(comm, i + 1, stages[i].backward_s, f"backward {i}")
        if i > 0:
            yield from msg(i + 1, 0, stages[i].input_bytes)
    for i in range(k):  # the acknowledgements unwind the nested requests
        if i > 0:
            yield from msg(0, i + 1, ACK_BYTES)
        yield from msg(i + 1, 0, ACK_BYTES)
    # optimizer: every worker at once
    if comm.rank == 0:
        for i in range(k):
            comm.isend(i + 1, ACK_BYTES, tag + 1 + i)
        for i in range(k):
            yield from comm.recv(i + 1, ACK_BYTES, tag + 1 + k + i)
    else:
        i = comm.rank - 1
        yield from comm.recv(0, ACK_BYTES, tag + 1 + i)
        yield from _compute(comm, comm.rank, stages[i].update_s, f"update {i}")
        yield from comm.send(0, ACK_BYTES, tag + 1 + k + i)


def simulate_split_step(cluster: Cluster, stages: Sequence[StageCost], loss_s: float = 0.0
                        ) -> SimResult:
    """One step on ``cluster`` (``len(stages) + 1`` ranks: the driver and one per stage)."""
    if cluster.world_size != len(stages) + 1:
        raise ValueError(f"{len(stages)} stages need {len(stages) + 1} ranks (a driver and "
                         f"one per stage), the cluster has {cluster.world_size}")
    return run_spmd(cluster, split_step, list(stages), loss_s)


def split_step_cost(stages: Sequence[StageCost], alpha_s: float, beta_s_per_B: float,
                    loss_s: float = 0.0) -> float:
    """Closed form of :func:`split_step` without contention, s::

        Σ_i (2α + (a_{i−1} + a_i)β + F_i)            forward
        + Σ_i (α + a_iβ + B_i) + Σ_{i>1} (α + a_{i−1}β)   backward's gradients
        + (2k − 1)α                                   acknowledgements
        + 2α + max_i U_i                              the distributed optimizer's step
    """
    k = len(stages)
    forward = math.fsum(2 * alpha_s + (s.input_bytes + s.output_bytes) * beta_s_per_B
                        + s.forward_s for s in stages)
    backward = math.fsum(alpha_s + s.output_bytes * beta_s_per_B + s.backward_s
                         for s in stages)
    backward += math.fsum(alpha_s + s.input_bytes * beta_s_per_B for s in stages[1:])
    acks = (2 * k - 1) * alpha_s
    update = 2 * alpha_s + max((s.update_s for s in stages), default=0.0)
    return forward + loss_s + backward + acks + update


def message_count(stages: int) -> dict[str, Any]:
    """Messages one step sends, by phase (``stages`` = k): forward 2k, backward gradients
    2k − 1, acknowledgements 2k − 1, optimizer 2k."""
    return {"forward": 2 * stages, "backward": 2 * stages - 1,
            "acknowledgements": 2 * stages - 1, "optimizer": 2 * stages,
            "total": 8 * stages - 2}
