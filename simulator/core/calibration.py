"""The calibration file: this machine's primitives, measured, as the simulator reads them.

``distml-lab calibrate`` (in :mod:`lab.calibrate`) measures point-to-point latency α and
bandwidth B (a ping-pong sweep, fitted), the local reduction rate (γ = 1/rate), the copy rate and
the compute rate with the real backend, and stores one :class:`CalibrationEntry` per
``(host, backend, world size)`` in a JSON file (``$DISTML_CALIBRATION``, by default
``~/.cache/distml-lab/calibration.json``), read once per command as a :class:`Calibration`.
:func:`simulator.host.factory.local_cluster` builds the simulated twin of the machine from an
entry. Only primitives are stored: no algorithm's prediction is ever fitted to that algorithm's
own measurements. :func:`fit_alpha_beta` (:mod:`simulator.core.fit`) is the one α-β fit.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from simulator.core.atomic import folder_lock, write_atomic
from simulator.core.fit import Fit as Fit  # re-exported: the fit's home was here
from simulator.core.fit import fit_alpha_beta as fit_alpha_beta

SCHEMA_VERSION = 1

CHAIN_BYTES = 4096
"""Message of the calibration's chain of dependent exchanges (:mod:`lab.calibrate`), bytes:
small, so that its time is latency."""
CHAIN_STEPS = 50
"""Dependent steps timed back to back in one repeat of the chain: the step time is their
mean, which takes in the occasional wait for a time slice as often as it happens."""
SHIFT_AHEAD_STEPS = 4
"""Steps in one call of the calibration's shift posted ahead
(:func:`backends.primitives.shift_ahead`): each receive after the first is posted a step early,
as a ring posts its steps; a call of a few steps, like a collective's, so that its first
receive, posted only as the call starts, counts as often as it does in a collective."""

SUSTAINED_REPEAT_S = 0.02
"""How long one timed repeat runs its operation back to back, s, wherever timing must match the
collectives' accuracy sweep (:func:`lab.sustained.measure_sustained`): long enough that the ranks
settle into the rhythm of back-to-back calls, each call's start overlapping the last one's end,
and that the barrier before a repeat does not count. The calibration times the point-to-point
and exchange primitives this way too."""


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
            (:func:`backends.primitives.shift_ahead`) — median time of one step at each of
            ``exchange_sizes``, s (empty: not measured). No send of these waits for its
            receiver's notice but the first of a call's: the collectives' model solves the
            bus from them (:mod:`simulator.host.bus`).
        swap_ahead_times_s: the same between partners (``r`` with ``r xor 1``), posted the
            same way (:func:`backends.primitives.swap_ahead`): each connection carries both
            directions at once, as a swap's do and a ring's (of three or more ranks) do not;
            median time of one step at each of ``exchange_sizes``, s (empty: not measured;
            never at two ranks, where the shift is this swap).
        reduce_ahead_times_s: the shift posted ahead whose every received message is
            reduced (``acc += row``, float32) before the rank's next send
            (:func:`backends.primitives.reduce_ahead`) — median time of one step at each of
            ``exchange_sizes``, s (empty: not measured). Against the shift it prices a
            reduction where the collectives run theirs, among messages in flight, on bytes
            just received (:mod:`simulator.host.reduction`).
        stream_times_s: rank 0 sending ``n`` bytes to rank 1, one way, back to back
            (:func:`backends.collectives.point_to_point.stream`, OSU's bandwidth test) —
            median time of one message at each of ``exchange_sizes``, s (empty: not
            measured). Each send is queued, posted before its receiver's notice came: the
            collectives' model weighs a queued message alone on the bus by it
            (:func:`simulator.host.pingpong.stream_weights`).
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
            :func:`backends.primitives.chain_ahead`).
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


_POSITIVE = ("bandwidth_Bps", "reduce_Bps", "memcpy_Bps", "flops_per_s",
             "world_size", "cores", "p2p_sizes", "p2p_times_s", "exchange_sizes",
             "exchange_times_s", "shift_ahead_times_s", "swap_ahead_times_s",
             "reduce_ahead_times_s", "stream_times_s")
"""Fields whose every value must be above zero (a zero rate or measured time means nothing
was measured, and a rate divides in the model); every other number must be at least 0 — a
fitted latency may come out at zero — but for the fit's residuals, which have a sign."""
_PER_SIZE = {"p2p_sizes": ("p2p_times_s", "fit_rel_residuals", "send_return_times_s"),
             "exchange_sizes": ("exchange_times_s", "shift_ahead_times_s", "swap_ahead_times_s",
                                "reduce_ahead_times_s", "stream_times_s")}
"""Lists of one value per measured size: each is empty (not measured) or as long as its sizes."""


def check_entry(key: str, raw: Any) -> CalibrationEntry:
    """The entry stored under ``key`` as a :class:`CalibrationEntry`, checked field by field.

    Refused, with one line naming the key and the field: a field of the wrong type or
    unknown, a missing required one, a number that is not finite, a rate, time or size that
    is not above zero (see :data:`_POSITIVE`), per-size lists that do not match their sizes,
    a chain that is not one step per ``k = 2 … world_size``, and an entry whose own host,
    backend, world size and network do not give ``key`` (data of one world filed under
    another's key).
    """
    def bad(why: str) -> CalibrationError:
        return CalibrationError(f"entry {key!r}: {why}; run 'distml-lab calibrate' again")

    if not isinstance(raw, dict):
        raise bad("is not an object")
    known = {f.name: f for f in fields(CalibrationEntry)}
    if unknown := sorted(set(raw) - set(known)):
        raise bad(f"unknown field {unknown[0]!r}")
    for name, f in known.items():
        if name not in raw:
            if f.default is f.default_factory is MISSING:
                raise bad(f"missing field {name!r}")
            continue
        _check_value(name, str(f.type), raw[name], bad)
    try:
        entry = CalibrationEntry(**raw)
    except TypeError as exc:
        raise bad(str(exc)) from None
    for sizes, per_size in _PER_SIZE.items():
        n = len(getattr(entry, sizes))
        for name in per_size:
            if len(getattr(entry, name)) not in (0, n):
                raise bad(f"{name} has {len(getattr(entry, name))} values for {n} sizes")
    for name in ("chain_latency_s", "chain_ahead_latency_s"):
        if len(getattr(entry, name)) not in (0, entry.world_size - 1):
            raise bad(f"{name} has {len(getattr(entry, name))} steps, not one per k = 2 … "
                      f"{entry.world_size}")
    if entry.key != key:
        raise bad(f"holds the data of {entry.key!r}")
    return entry


def _check_value(name: str, kind: str, value: Any, bad: Callable[[str], Exception]) -> None:
    """One field's value against its annotation (``str``, ``int``, ``float``, ``… | None``,
    ``list[int]``, ``list[float]``) and its sign."""
    if value is None and kind.endswith("| None"):
        return
    base = kind.removesuffix(" | None")
    items = value if base.startswith("list[") else [value]
    if base.startswith("list[") and not isinstance(value, list):
        raise bad(f"{name} must be a list of numbers, not {value!r}")
    base = base.removeprefix("list[").removesuffix("]")
    for v in items:
        if base == "str":
            if not isinstance(v, str):
                raise bad(f"{name} must be text, not {v!r}")
            continue
        number = (int,) if base == "int" else (int, float)
        if isinstance(v, bool) or not isinstance(v, number):
            raise bad(f"{name} must be {'a whole number' if base == 'int' else 'a number'}, "
                      f"not {v!r}")
        if not math.isfinite(v):
            raise bad(f"{name} must be finite, not {v!r}")
        if name in _POSITIVE and v <= 0:
            raise bad(f"{name} must be above zero, not {v!r}")
        if name == "fit_rel_residuals" and v <= -1:  # (fit − measured)/measured: fit > 0
            raise bad(f"{name} must be above -1 (a fitted time is positive), not {v!r}")
        if name != "fit_rel_residuals" and v < 0:
            raise bad(f"{name} must not be negative, not {v!r}")


def load_calibration(path: str | Path | None = None) -> dict[str, CalibrationEntry]:
    """Every entry of a calibration file, by key. A missing file is an empty dict.

    Raises:
        CalibrationError: in one line, for a file that cannot be read, has another schema,
            or holds an entry that :func:`check_entry` refuses.
    """
    path = Path(path) if path is not None else default_calibration_path()
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CalibrationError(
            f"cannot read calibration file {path}: {type(exc).__name__}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), dict):
        raise CalibrationError(f"calibration file {path} is not a distml-lab calibration "
                               "(no 'entries' object)")
    if doc.get("schema") != SCHEMA_VERSION:
        raise CalibrationError(
            f"calibration file {path} has schema {doc.get('schema')!r}, "
            f"expected {SCHEMA_VERSION}; run 'distml-lab calibrate' again")
    entries = {}
    for key, raw in doc["entries"].items():
        try:
            entries[key] = check_entry(key, raw)
        except CalibrationError as exc:
            raise CalibrationError(f"calibration file {path}: {exc}") from None
    return entries


@dataclass(frozen=True, eq=False)
class Calibration:
    """A calibration file as read once (:meth:`load`) by the command line and handed down: every
    prediction of one command reads the same entries. Compared and hashed by identity, so a
    model solved from one may be kept for as long as the object lives."""

    path: Path
    entries: Mapping[str, CalibrationEntry]

    @classmethod
    def load(cls, path: str | Path | None = None) -> Calibration:
        """Read ``path`` (default: :func:`default_calibration_path`); a missing file has no
        entries. Raises :class:`CalibrationError` as :func:`load_calibration` does."""
        resolved = Path(path) if path is not None else default_calibration_path()
        return cls(resolved, load_calibration(resolved))

    @classmethod
    def of(cls, calibration: Calibration | str | Path | None) -> Calibration:
        """``calibration`` itself, or the file it names read now (:meth:`load`)."""
        return calibration if isinstance(calibration, Calibration) else cls.load(calibration)

    def entry(self, world_size: int, backend: str = "gloo", network: str = "loopback",
              host: str | None = None) -> CalibrationEntry:
        """The entry for this host (or ``host``), ``backend``, ``world_size`` and ``network``,
        or a :class:`CalibrationError` that says how to measure it."""
        key = entry_key(host or this_host(), backend, world_size, network)
        if key in self.entries:
            return self.entries[key]
        have = ", ".join(sorted(self.entries)) or "none"
        how = "" if network == "loopback" else (
            f" --network shaped --bandwidth {network.partition(':')[2]}")
        raise CalibrationError(
            f"no calibration for {key} in {self.path} (have: {have}); "
            f"run 'distml-lab calibrate --world {world_size}{how}'")


def find_entry(world_size: int, backend: str = "gloo", host: str | None = None,
               path: str | Path | None = None, network: str = "loopback") -> CalibrationEntry:
    """The entry for this host, ``backend``, ``world_size`` and ``network`` in the file
    ``path``, or a clear error (:meth:`Calibration.entry`).

    ``network`` is ``loopback`` or a shaped network's key (``shaped:1gbit``, see
    :func:`simulator.core.shaped.network_key`).
    """
    return Calibration.load(path).entry(world_size, backend, network, host)


def check_writable(path: str | Path | None = None) -> Path:
    """Check, before any measuring, that a calibration can be saved into ``path``: the file,
    if there, is a calibration this version reads (so no entry of it is lost by a rewrite),
    and its folder — or the nearest folder above it that exists — is writable. Creates
    nothing. Returns the path.

    Raises:
        CalibrationError: in one line, naming the file or folder.
    """
    path = Path(path) if path is not None else default_calibration_path()
    if path.is_dir():
        raise CalibrationError(f"calibration file {path} is a folder; name a file")
    load_calibration(path)
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise CalibrationError(f"cannot save the calibration file {path}: {folder} is not a "
                               "writable folder")
    return path


def save_entry(entry: CalibrationEntry, path: str | Path | None = None) -> Path:
    """Add or replace one entry: a locked read-modify-write, written atomically.

    Two calibrations saving into one file at once both keep their entries: the read, the
    change and the write happen under :func:`~simulator.core.atomic.folder_lock` of the
    file's folder, and the write is :func:`~simulator.core.atomic.write_atomic` (a crash
    leaves the old file or the new one). An entry that :func:`check_entry` refuses is never
    written.
    """
    path = Path(path) if path is not None else default_calibration_path()
    check_entry(entry.key, asdict(entry))
    path.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(path.parent):
        entries = load_calibration(path)
        entries[entry.key] = entry
        doc: dict[str, Any] = {"schema": SCHEMA_VERSION,
                               "entries": {k: asdict(v) for k, v in sorted(entries.items())}}
        write_atomic(path, json.dumps(doc, indent=2))
    return path
