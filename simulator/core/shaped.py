"""The shaped network: ranks on a switch whose every port is rate limited, as ``tc`` sets it.

``backends.shaped`` emulates a small cluster on one machine: each rank in its own Linux network
namespace, joined by a veth pair to a bridge (the switch), each port shaped with the token
bucket filter (``tc qdisc ... tbf rate R``) in both directions. This module is its simulated
twin, and the one place that reads and writes the rates people type:

* :func:`parse_rate` — ``"1gbit"``, ``"100mbit"`` (``tc``'s decimal bit units) → bits/s;
* :func:`parse_bandwidths` — ``"1gbit,1gbit,100mbit"`` → one rate per rank;
* :func:`network_key` — the name a shaped network is calibrated under
  (``"shaped:1gbit"``), so its entry never replaces the loopback one;
* :func:`shaped_topology` / :func:`shaped_cluster` — a switch (star) with one full-duplex port
  per rank, each port as fast as its rank's shaped link carries *payload*.

A shaped link of line rate R carries less than R/8 bytes/s of payload: ``tbf`` counts whole
Ethernet frames (a 1514-byte frame carries 1448 payload bytes of TCP with timestamps), and gloo
adds a small header per message. Calibration measures the payload bandwidth B of the rank 0 ↔ 1
link with a ping-pong (:mod:`lab.calibrate`); its ratio to the line rate, the link's
*efficiency* η = B / (R/8), is a property of the framing, not of the rate, so a link shaped to
R_k carries η·R_k/8 bytes/s. That is how one calibration prices every port of a network whose
ranks differ in bandwidth. Nothing here is fitted to a collective.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace

from simulator.core.network import Link, Node, Topology

LOOPBACK = "loopback"
"""The network of ranks that talk over the host's loopback (the default)."""

SHAPED = "shaped"
"""The network of ranks in namespaces on rate-limited links (:mod:`backends.shaped`)."""

NETWORKS = (LOOPBACK, SHAPED)

RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
              "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9}
"""``tc``'s rate units: ``…bit`` are bits per second, ``…bps`` *bytes* per second (decimal)."""

MIN_RATE_BPS = 10**6
"""Slowest rate accepted, bits/s: below 1 Mbit/s a 64 MiB sweep point takes minutes."""

MAX_RATE_BPS = 100 * 10**9
"""Fastest rate accepted, bits/s (tbf's 64-bit rates go further; a veth on a laptop does not)."""

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$")


def parse_rate(text: str) -> int:
    """``"100mbit"`` → 100_000_000 bits/s; raises ``ValueError`` with one line otherwise."""
    match = _RATE.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in RATE_UNITS:
        raise ValueError(f"invalid bandwidth {text.strip()!r}: expected a rate like 100mbit, "
                         "1gbit or 10gbit (units: kbit, mbit, gbit, or kbps, mbps, gbps for "
                         "bytes/s)")
    bps = round(float(match.group(1)) * RATE_UNITS[unit])
    if not MIN_RATE_BPS <= bps <= MAX_RATE_BPS:
        raise ValueError(f"invalid bandwidth {text.strip()!r}: choose between 1mbit and "
                         "100gbit")
    return bps


def format_rate(bps: float) -> str:
    """100_000_000 → ``"100mbit"`` (the largest unit that keeps a whole number)."""
    for unit, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps >= scale and bps % scale == 0:
            return f"{int(bps // scale)}{unit}"
    return f"{int(bps)}bit"


def parse_bandwidths(spec: str | Sequence[str | int], world_size: int | None = None
                     ) -> list[int]:
    """One line rate per rank, bits/s: ``"1gbit"`` for every rank, or one per rank.

    ``spec`` is a comma list (``"1gbit,1gbit,100mbit"``) or a sequence of rates (strings, or
    ints in bits/s). With ``world_size`` given a single rate is repeated for every rank and a
    list must have exactly ``world_size`` entries.
    """
    parts: list[str | int] = (list(spec.split(",")) if isinstance(spec, str) else list(spec))
    if not parts or any(isinstance(p, str) and not p.strip() for p in parts):
        raise ValueError(f"invalid bandwidth list {spec!r}: expected e.g. 1gbit or "
                         "1gbit,1gbit,100mbit")
    rates = [parse_rate(p) if isinstance(p, str) else parse_rate(f"{int(p)}bit")
             for p in parts]
    if world_size is None:
        return rates
    if len(rates) == 1:
        return rates * world_size
    if len(rates) != world_size:
        raise ValueError(f"{len(rates)} bandwidths ({','.join(map(format_rate, rates))}) for "
                         f"{world_size} "
                         f"ranks: give one rate, or one per rank")
    return rates


def spec_text(rates: Sequence[int]) -> str:
    """The canonical spec of per-rank rates: ``"1gbit"`` if all equal, else a comma list."""
    if rates and all(r == rates[0] for r in rates):
        return format_rate(rates[0])
    return ",".join(format_rate(r) for r in rates)


def network_key(network: str = LOOPBACK, bandwidth: str | Sequence[str | int] | None = None
                ) -> str:
    """The calibration name of a network: ``"loopback"`` or ``"shaped:<rates>"``."""
    if network == LOOPBACK:
        return LOOPBACK
    if network != SHAPED:
        raise ValueError(f"unknown network {network!r}; choose {' or '.join(NETWORKS)}")
    if bandwidth is None:
        raise ValueError("a shaped network needs a bandwidth, e.g. 1gbit")
    return f"{SHAPED}:{spec_text(parse_bandwidths(bandwidth))}"


def key_rates(key: str) -> list[int]:
    """The per-rank rates named in a network key (``"shaped:1gbit"`` → ``[10**9]``)."""
    name, _, spec = key.partition(":")
    if name != SHAPED or not spec:
        raise ValueError(f"{key!r} is not a shaped network")
    return parse_bandwidths(spec)


def shaped_topology(ports: Sequence[Link], busy_latency_s: float | None = None) -> Topology:
    """A switch with one full-duplex port per rank, and one connection per pair of ranks.

    Rank ``k``'s port ``ports[k]`` joins ``k`` to the switch ``"sw"``: the direction
    ``k -> "sw"`` carries everything ``k`` sends, ``"sw" -> k`` everything it receives (the
    bridge port's egress queue of the real network), so messages into one rank share its down
    direction; each port should carry half of the path latency. A port whose host effects'
    ``ack_fraction`` (:class:`~simulator.core.network.LinkEffects`) is ε also carries, in the
    direction opposite to each transfer, ε bytes of TCP acknowledgements per byte: a rank
    that sends while it receives (a ring step, an exchange) sends its data beside the
    acknowledgements of what it receives.

    Between the two ports a message crosses its pair's *connection*: gloo keeps one TCP
    connection per pair of ranks, a byte stream in each direction, so two messages from ``a``
    to ``b`` cross one after the other (``fifo``: a ring's next chunk queues behind the one
    still on the wire instead of sharing the port with it), while the two directions are
    independent (they overlap when each step posts its receive before its send, see
    :mod:`backends.collectives.comm`).

    Every message also crosses the host, ``"host" -> "host'"``: no bandwidth limit, but the
    ranks are still processes sharing this machine's cores. A message that starts while
    another is in flight anywhere pays ``busy_latency_s`` instead of the idle α (the
    calibration's concurrent shift, as :meth:`Topology.shared_bus` does on loopback; a host
    effect, stored in that link's :class:`~simulator.core.network.LinkEffects`).
    """
    through = Link(0.0, math.inf, "none")
    alpha = sum(p.latency_s for p in ports[:2]) if len(ports) > 1 else 0.0
    extra = None if busy_latency_s is None else max(0.0, busy_latency_s - alpha)
    links: dict[frozenset[Node], Link] = {
        frozenset(("sw", "host")): through,
        frozenset(("host", "host'")): through.with_host(busy_latency_s=extra),
    }
    for r, link in enumerate(ports):
        links[frozenset((r, "sw"))] = link
    for a in range(len(ports)):
        for b in range(a + 1, len(ports)):
            head, tail = f"c{a}-{b}", f"c{a}-{b}'"  # a -> b crosses head -> tail, b -> a back
            links[frozenset((head, tail))] = replace(through, contention="fifo")
            for end in (head, tail):
                links[frozenset(("host'", end))] = through
                links[frozenset((end, "sw"))] = through

    def router(topo: Topology, src: int, dst: int) -> list[Node]:
        if src == dst:
            return [src]
        lo, hi = min(src, dst), max(src, dst)
        stream = [f"c{lo}-{hi}", f"c{lo}-{hi}'"]
        return [src, "sw", "host", "host'", *(stream if src < dst else stream[::-1]), "sw",
                dst]

    return Topology(len(ports), links, "shaped_switch", router)


def shift_flows(world_size: int) -> int:
    """Messages in flight during the calibration's concurrent shift: one per rank (each
    receives from its left neighbour while it sends to its right one; at world 2 that is
    the pair's exchange)."""
    return world_size


def ack_fraction(bandwidth_Bps: float, shift_Bps: float, world_size: int,
                 rates_bps: Sequence[int] = ()) -> float:
    """ε: what a port sending while it receives loses to acknowledgements, from calibration.

    ``shift_Bps`` is the calibration's aggregate rate of the concurrent shift (every rank
    sends to its right neighbour while receiving from its left one, :func:`shift_flows`
    messages, timed until the slowest is done), ``bandwidth_Bps`` one direction's ping-pong
    bandwidth on the rank 0 ↔ 1 path, ``rates_bps`` the calibrated line rates (the slowest
    port sets the shift's pace; none given: all alike). Each port carries its data plus ε
    times its incoming data, so the slowest port's rank moves B_slow/(1 + ε):
    ε = B_slow / (shift_Bps / world) − 1, kept within [0, 0.5] (0 when not measured).
    Measured at 100 Mbit/s: 0.04–0.08; the acknowledgement frames alone are 66 bytes per two
    1514-byte frames, 0.023.
    """
    if shift_Bps <= 0 or world_size < 2:
        return 0.0
    slowest = bandwidth_Bps
    if rates_bps:
        slowest *= min(rates_bps) / min(rates_bps[0], rates_bps[1 % len(rates_bps)])
    per_port = shift_Bps / shift_flows(world_size)
    return min(0.5, max(0.0, slowest / per_port - 1.0))


def efficiency(bandwidth_Bps: float, rates_bps: Sequence[int]) -> float:
    """η: payload bytes/s measured on the rank 0 ↔ 1 path over its line rate in bytes/s."""
    line = min(rates_bps[0], rates_bps[1 % len(rates_bps)]) / 8
    return bandwidth_Bps / line


def port_links(latency_s: float, bandwidth_Bps: float, calibrated_rates: Sequence[int],
               rates: Sequence[int], contention: str = "fair", acks: float = 0.0
               ) -> list[Link]:
    """One port per rank of ``rates``, priced from a calibration on ``calibrated_rates``.

    ``latency_s`` and ``bandwidth_Bps`` are the ping-pong fit's α and B on the calibrated
    network; each port gets half of α and η·R_k/8 bytes/s (see the module docstring), and
    carries ``acks`` (ε, :func:`ack_fraction`) of acknowledgements against each transfer (a
    host effect, in the port's :class:`~simulator.core.network.LinkEffects`).
    """
    eta = efficiency(bandwidth_Bps, calibrated_rates)
    port = Link(latency_s / 2, bandwidth_Bps, contention)  # type: ignore[arg-type]
    port = port.with_host(ack_fraction=acks)
    return [replace(port, bandwidth_Bps=eta * r / 8) for r in rates]
