"""What one simulated training run is given (:class:`PSSpec`), with the costs it measured.

Layout, consistency model, the keys each worker moves, its compute and straggler delays, and the
real twin's costs measured by the lab: the software's (:class:`PSCosts`, on one process) and,
optionally, the van's point-to-point messages (:class:`VanLink`, at the run's world size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PSCosts:
    """The software costs of the real twin's code, measured on one process (s).

    Attributes:
        message_s: a message's header coded and decoded and its tensors allocated, per
            message, on each side.
        anysource_s: what a header costs more than a plain message because the receiving
            thread takes it *from any source*: gloo's handshake, the sender's send-ready
            notice and the receiver's recv-ready answer (:class:`AnySource`); measured by
            ping-pong, not on a PS run.
        wakeup_s: a waiting thread woken by another (a response handed to the app).
        push_s, push_per_value_s: a server handling a push: fixed and per value.
        pull_s, pull_per_value_s: a server handling a pull.
        apply_per_value_s: BSP: applying the summed gradient, per value.
    """

    message_s: float = 20e-6
    anysource_s: float = 40e-6
    wakeup_s: float = 30e-6
    push_s: float = 30e-6
    push_per_value_s: float = 5e-9
    pull_s: float = 30e-6
    pull_per_value_s: float = 3e-9
    apply_per_value_s: float = 5e-9


@dataclass(frozen=True)
class VanLink:
    """The van's point-to-point messages on one host, measured as the van sends them.

    On loopback a message is no wire's α + n/B: both ends are processes on the host's cores,
    and moving a message *is* CPU work — socket copies, gloo's loop thread, thread wake-ups —
    whose total is about its one-way time when the cores are free. A header is received *from
    any source*, and when several peers send to one node (its *fan-in*: a server hears from
    ``W`` workers, a worker from ``S`` servers) messages often arrive before the receive is
    posted, which costs more. So the lab times the van's own pattern, a header then a payload,
    as an echo from ``k`` senders to one node at the run's world size
    (:func:`lab.parameter_server.van_echo`), and the simulated van spends that CPU on the
    shared cores (or, with ``on_cores=False``, as a plain delay).

    Attributes:
        header_s: CPU seconds of one header (both ends), per fan-in ``1, 2, …``.
        payload_s: fixed CPU seconds of a payload after its header, per fan-in.
        payload_Bps: bytes per CPU second of a payload, per fan-in.
        on_cores: the cost is work of the host's shared cores (loopback); ``False``: a delay.
    """

    header_s: tuple[float, ...]
    payload_s: tuple[float, ...]
    payload_Bps: tuple[float, ...]
    on_cores: bool = True

    def time(self, nbytes: int, header: bool, fan_in: int = 1) -> float:
        """Cost of one part of a PS message (the header, or a payload) sent to a node with
        ``fan_in`` peers sending to it (beyond the measured fan-ins: the largest), s."""
        k = min(max(fan_in, 1), len(self.header_s)) - 1
        if header:
            return self.header_s[k]
        return self.payload_s[k] + nbytes / self.payload_Bps[k]


@dataclass(frozen=True)
class PSSpec:
    """One simulated training run.

    Attributes:
        servers, workers: ``S`` and ``W``.
        consistency, tau: ``bsp``, ``ssp`` (with bounded delay τ) or ``async``.
        slices: keys each worker pulls and pushes from each server per iteration,
            ``[iterations, workers, servers]`` (see :func:`sparse_lr_slices`,
            :func:`dense_slices`).
        dense: the keys are contiguous ranges (no keys payload on the wire).
        compute_s: each worker's gradient time per iteration, ``[iterations, workers]``, s.
        delay_s: straggler delays (:func:`straggler_delays`), same shape, s.
        costs: the software costs (:class:`PSCosts`).
        cores: CPU cores the ranks share (``inf``: one each, as on a real cluster).
        van: the van's measured point-to-point times (:class:`VanLink`); ``None``: messages
            cost what the cluster's network says. With a van link, run on a cluster whose
            links cost nothing (:func:`van_cluster`).
        rendezvous: sends wait for the receiver, as gloo's do (this lab's van); ``False``:
            sends are queued and the sender goes on, as PS-Lite's ZeroMQ van does.
    """

    servers: int
    workers: int
    consistency: str
    tau: int
    slices: np.ndarray
    dense: bool
    compute_s: np.ndarray
    delay_s: np.ndarray
    costs: PSCosts = PSCosts()
    cores: float = math.inf
    van: VanLink | None = None
    rendezvous: bool = True

    @property
    def iterations(self) -> int:
        return int(self.slices.shape[0])

    @property
    def world_size(self) -> int:
        return 1 + self.servers + self.workers
