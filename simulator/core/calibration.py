"""The calibration file: this machine's primitives, measured, as the simulator reads them.

``distml-lab calibrate`` (in :mod:`lab.calibrate`) measures point-to-point latency α and
bandwidth B (a ping-pong sweep, fitted), the local reduction rate (γ = 1/rate), the copy rate and
the compute rate with the real backend, and stores one :class:`CalibrationEntry` per
``(host, backend, world size)`` in a JSON file. :meth:`simulator.core.hardware.Cluster.local`
builds the simulated twin of the machine from it. Only primitives are stored: no algorithm's
prediction is ever fitted to that algorithm's own measurements. :func:`fit_alpha_beta` is the
one α-β fit that both the calibration and the simulator's reading of it use.

The file lives at ``$DISTML_CALIBRATION`` or, by default, ``~/.cache/distml-lab/calibration.json``.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_VERSION = 1

CHAIN_BYTES = 4096
"""Message of the calibration's chain of dependent exchanges (:mod:`lab.calibrate`), bytes:
small, so that its time is latency."""
CHAIN_STEPS = 50
"""Dependent steps timed back to back in one repeat of the chain: the step time is their
mean, which takes in the occasional wait for a time slice as often as it happens."""
SHIFT_AHEAD_STEPS = 4
"""Steps in one call of the calibration's shift posted ahead (:func:`lab.calibrate.shift_ahead`):
each receive after the first is posted a step early, as a ring posts its steps; a call of a few
steps, like a collective's, so that its first receive, posted only as the call starts, counts
as often as it does in a collective."""

SUSTAINED_REPEAT_S = 0.02
"""How long one timed repeat runs its operation back to back, s, wherever timing must match the
collectives' accuracy sweep (:func:`lab.compare.measure_sustained`): long enough that the ranks
settle into the rhythm of back-to-back calls, each call's start overlapping the last one's end,
and that the barrier before a repeat does not count. The calibration times the point-to-point
and exchange primitives this way too."""


@dataclass(frozen=True)
class Fit:
    """``t(n) = α + n·β`` fitted to measurements."""

    alpha_s: float
    beta_s_per_B: float
    rel_residuals: tuple[float, ...]

    @property
    def bandwidth_Bps(self) -> float:
        """1/β, bytes/s."""
        return 1.0 / self.beta_s_per_B


def fit_alpha_beta(sizes: Sequence[float], times_s: Sequence[float]) -> Fit:
    """Least-squares fit of ``t = α + n·β`` minimising the sum of squared *relative* errors.

    Dividing each equation ``α + n_i·β = t_i`` by ``t_i`` gives the linear system
    ``α/t_i + β·n_i/t_i = 1``, solved by ordinary least squares. α is kept ≥ 0 (refitting β
    alone if the unconstrained α comes out negative).
    """
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if n.shape != t.shape or n.size < 2:
        raise ValueError("need at least two (size, time) points of equal count")
    if np.any(t <= 0):
        raise ValueError("times must be positive")
    a = np.stack([1 / t, n / t], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if alpha < 0:
        alpha = 0.0
        beta = float(np.sum(n / t) / np.sum((n / t) ** 2))
    if beta <= 0:
        raise ValueError("the fitted bandwidth is not positive: are the times increasing?")
    residuals = tuple(float(x) for x in (alpha + n * beta - t) / t)
    return Fit(float(alpha), float(beta), residuals)


def exchange_flows(world_size: int) -> int:
    """Messages in flight during one exchange: both directions of each full pair."""
    return 2 * (world_size // 2)


class CalibrationError(Exception):
    """The calibration file is missing, unreadable, or has no entry for what was asked."""


@dataclass(frozen=True)
class CalibrationEntry:
    """The measured primitives of one machine, backend and world size.

    Attributes:
        host: host name the measurement ran on.
        backend: ``gloo`` or ``nccl``.
        world_size: ranks running at once while measuring (contention for cores included).
        latency_s: α of the fitted point-to-point model, s.
        bandwidth_Bps: B of the fitted point-to-point model, bytes/s.
        reduce_Bps: elementwise float32 sum, bytes of output per second (γ = 1/reduce_Bps).
        memcpy_Bps: tensor copy, bytes per second.
        flops_per_s: float32 matmul, FLOP/s per rank.
        bus_bandwidth_Bps: aggregate bytes/s of all ranks exchanging at once (0: not
            measured); the host's shared bus in :meth:`Topology.shared_bus`.
        bus_latency_s: the latency of those concurrent exchanges (the fit's intercept), s:
            what a message pays when it starts while others are in flight (0: not measured).
        cores: CPU cores of the host.
        p2p_sizes: the ping-pong sizes measured, bytes.
        p2p_times_s: median one-way time at each size, s.
        fit_rel_residuals: (fit − measured)/measured at each size.
        exchange_sizes: sizes of the concurrent-exchange measurement, bytes per message.
        exchange_times_s: median time of each exchange, s.
        shift_ahead_times_s: the ring's shift posted as the collectives post their steps —
            every rank sends ``n`` bytes right while it receives from the left, its receive of
            the next step posted before it waits for the current one
            (:func:`lab.calibrate.shift_ahead`) — median time of one step at each of
            ``exchange_sizes``, s (empty: not measured). No send of these waits for its
            receiver's notice but the first of a call's: the collectives' model solves the
            bus from them (:mod:`simulator.core.bus`).
        swap_ahead_times_s: the same between partners (``r`` with ``r xor 1``), posted the
            same way (:func:`lab.calibrate.swap_ahead`): each connection carries both
            directions at once, as a swap's do and a ring's (of three or more ranks) do not;
            median time of one step at each of ``exchange_sizes``, s (empty: not measured;
            never at two ranks, where the shift is this swap).
        reduce_ahead_times_s: the shift posted ahead whose every received message is
            reduced (``acc += row``, float32) before the rank's next send
            (:func:`lab.calibrate.reduce_ahead`) — median time of one step at each of
            ``exchange_sizes``, s (empty: not measured). Against the shift it prices a
            reduction where the collectives run theirs, among messages in flight, on bytes
            just received (:mod:`simulator.core.reduction`).
        stream_times_s: rank 0 sending ``n`` bytes to rank 1, one way, back to back
            (:func:`backends.collectives.point_to_point.stream`, OSU's bandwidth test) —
            median time of one message at each of ``exchange_sizes``, s (empty: not
            measured). Each send is queued, posted before its receiver's notice came: the
            collectives' model weighs a queued message alone on the bus by it
            (:func:`simulator.core.pingpong.stream_weights`).
        created: ISO time of the measurement.
        torch_version: the PyTorch that measured it.
        network: what the ranks talked over: ``loopback`` (the host's own network, the
            default) or a shaped network such as ``shaped:1gbit`` (:mod:`backends.shaped`,
            :mod:`simulator.core.shaped`); entries of different networks never replace
            each other.
        chain_latency_s: the time of one step of a chain of dependent exchanges among ``k``
            ranks (a ring of small messages, each step waiting for the last), for ``k = 2, 3,
            …, world_size``, s (empty: not measured): what a message pays when ``k`` are in
            flight and every sender had to be woken to send it — on a host with fewer cores
            than runnable threads, a wait for a time slice (:mod:`lab.calibrate`).
        chain_ahead_latency_s: the same chain posted as the collectives post their steps —
            each rank's receive of the next step posted before it waits for the current one —
            one step for ``k = 2, …, world_size``, s (empty: not measured;
            :func:`lab.calibrate.chain_ahead`).
        send_buffer_bytes: on a shaped network, the bytes of a large message still unsent
            when a blocking send returns — the socket send buffer's payload capacity
            (``None``: not measured; :mod:`lab.calibrate`).
        send_return_times_s: on loopback, how long rank 0's blocking send of the ping-pong
            took to return at each of ``p2p_sizes``, median, s (empty: not measured) — once
            the socket buffers hold what rank 1 has not yet read, before the one-way time.
        ready_notice_s: what gloo's receive-ready notice adds when a receive is posted after
            its send — the time from posting a late receive to its completion, less a
            message's one-way time to a receive posted early — s (``None``: not measured;
            :mod:`lab.calibrate`).
        post_overhead_s: the CPU time of posting one non-blocking send or receive (half of
            posting an ``irecv`` and an ``isend`` back to back, every rank at once), s — LogP's
            *o* (``None``: not measured; :mod:`lab.calibrate`).
        rank_sched: the Linux scheduling policy the ranks ran under, ``batch`` or ``normal``
            (:func:`backends.launch.apply_rank_sched`); entries written before the lab chose
            one ran under ``normal``. On a host with fewer cores than threads the two measure
            different machines: under ``normal`` gloo's ranks sometimes stall for a scheduler
            tick.
    """

    host: str
    backend: str
    world_size: int
    latency_s: float
    bandwidth_Bps: float
    reduce_Bps: float
    memcpy_Bps: float
    flops_per_s: float
    bus_bandwidth_Bps: float = 0.0
    bus_latency_s: float = 0.0
    cores: int = 1
    p2p_sizes: list[int] = field(default_factory=list)
    p2p_times_s: list[float] = field(default_factory=list)
    fit_rel_residuals: list[float] = field(default_factory=list)
    exchange_sizes: list[int] = field(default_factory=list)
    exchange_times_s: list[float] = field(default_factory=list)
    created: str = ""
    torch_version: str = ""
    network: str = "loopback"
    chain_latency_s: list[float] = field(default_factory=list)
    send_buffer_bytes: float | None = None
    ready_notice_s: float | None = None
    post_overhead_s: float | None = None
    chain_ahead_latency_s: list[float] = field(default_factory=list)
    rank_sched: str = "normal"
    shift_ahead_times_s: list[float] = field(default_factory=list)
    swap_ahead_times_s: list[float] = field(default_factory=list)
    stream_times_s: list[float] = field(default_factory=list)
    send_return_times_s: list[float] = field(default_factory=list)
    reduce_ahead_times_s: list[float] = field(default_factory=list)

    @property
    def key(self) -> str:
        """The entry's key in the file: ``host/backend/world`` (``…/network`` if shaped)."""
        return entry_key(self.host, self.backend, self.world_size, self.network)


def entry_key(host: str, backend: str, world_size: int, network: str = "loopback") -> str:
    """``host/backend/world`` — the key of one entry; ``host/backend/world/network`` for any
    network but loopback (so files written before networks existed keep their keys)."""
    key = f"{host}/{backend}/{world_size}"
    return key if network == "loopback" else f"{key}/{network}"


def this_host() -> str:
    """The host name calibration entries are keyed by."""
    return socket.gethostname()


def default_calibration_path() -> Path:
    """``$DISTML_CALIBRATION`` or ``~/.cache/distml-lab/calibration.json``."""
    env = os.environ.get("DISTML_CALIBRATION")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "distml-lab" / "calibration.json"


def load_calibration(path: str | Path | None = None) -> dict[str, CalibrationEntry]:
    """Every entry of a calibration file, by key. A missing file is an empty dict."""
    path = Path(path) if path is not None else default_calibration_path()
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
        if doc.get("schema") != SCHEMA_VERSION:
            raise CalibrationError(
                f"calibration file {path} has schema {doc.get('schema')!r}, "
                f"expected {SCHEMA_VERSION}; run 'distml-lab calibrate' again")
        return {k: CalibrationEntry(**v) for k, v in doc["entries"].items()}
    except CalibrationError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CalibrationError(
            f"cannot read calibration file {path}: {type(exc).__name__}: {exc}") from None


def find_entry(world_size: int, backend: str = "gloo", host: str | None = None,
               path: str | Path | None = None, network: str = "loopback") -> CalibrationEntry:
    """The entry for this host, ``backend``, ``world_size`` and ``network``, or a clear error.

    ``network`` is ``loopback`` or a shaped network's key (``shaped:1gbit``, see
    :func:`simulator.core.shaped.network_key`).
    """
    host = host or this_host()
    entries = load_calibration(path)
    key = entry_key(host, backend, world_size, network)
    if key in entries:
        return entries[key]
    have = ", ".join(sorted(entries)) or "none"
    how = "" if network == "loopback" else (
        f" --network shaped --bandwidth {network.partition(':')[2]}")
    raise CalibrationError(
        f"no calibration for {key} in {path or default_calibration_path()} (have: {have}); "
        f"run 'distml-lab calibrate --world {world_size}{how}'")


def save_entry(entry: CalibrationEntry, path: str | Path | None = None) -> Path:
    """Add or replace one entry, writing the file atomically (never half-written)."""
    path = Path(path) if path is not None else default_calibration_path()
    entries = load_calibration(path)
    entries[entry.key] = entry
    doc: dict[str, Any] = {"schema": SCHEMA_VERSION,
                           "entries": {k: asdict(v) for k, v in sorted(entries.items())}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(path)
    return path
