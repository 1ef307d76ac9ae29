"""The van's messages, measured: a receive from any source, and a header and payload echoed.

On loopback moving a message is work of the host's cores, so the lab times the van's own
pattern from ``k`` senders to one node (the fan-in a server or a worker has), with the rank
programs of :mod:`backends.parameter_server.measure`: :func:`measure_anysource` (ping-pong,
:func:`anysource_ping_pong`) gives what a receive from any source costs more than a named one,
and :func:`measure_van_link` fits a :class:`~simulator.parameter_server.VanLink` to the CPU of a
request and its echo, through the lab's own van, customer and app (:func:`app_echo`) or bare
gloo sends shaped as the van's (:func:`van_echo`) — one launch at the run's world size.

Units: seconds (CPU seconds per message), bytes.
"""

from __future__ import annotations

import numpy as np

from backends.parameter_server.measure import (
    VAN_PAYLOAD_SIZES,
    anysource_ping_pong,
    app_echo,
    van_echo,
    van_echo_all,
)
from lab.parameter_server.profile import fit_line
from simulator.parameter_server import ZERO_COST_LINK_BPS, VanLink

__all__ = ["VAN_PAYLOAD_SIZES", "anysource_ping_pong", "app_echo", "measure_anysource",
           "measure_van_link", "van_echo"]


def measure_van_link(world: int, fan_ins: tuple[int, ...] | None = None,
                     rounds: int = 300, through: str = "app") -> VanLink:
    """The van's messages at ``world`` ranks (:class:`~simulator.parameter_server.VanLink`):
    for each fan-in ``k`` (default ``1 … world − 2``), the CPU of a header alone and the
    payload line ``a + n/B`` fitted to the payloads' extra CPU (least squares, a, 1/B ≥ 0),
    from :func:`app_echo` (``through="app"``: the lab's van, customer and app, as a run
    sends them) or :func:`van_echo` (``"gloo"``: bare gloo sends and receives shaped as the
    van's) — one launch of ``world`` processes."""
    from backends.launch import spawn

    fan_ins = fan_ins or tuple(range(1, max(world - 1, 2)))
    if max(fan_ins) > world - 2 or min(fan_ins) < 1:
        raise ValueError(f"a fan-in must be between 1 and {world - 2} at world {world}")
    if through not in ("app", "gloo"):
        raise ValueError(f"through must be 'app' or 'gloo', got {through!r}")
    outs = spawn(app_echo if through == "app" else van_echo_all, max(world, 3), fan_ins,
                 rounds, backend="gloo", timeout=60, deadline=60 + 10 * len(fan_ins))
    header, payload, rate = [], [], []
    for i in range(len(fan_ins)):
        cpu = np.sum([o[i] for o in outs], axis=0)  # CPU per message, all ranks taking part
        header.append(float(cpu[0]))
        sizes = [n for n in VAN_PAYLOAD_SIZES if n]
        a, b = fit_line(sizes, [float(c) - cpu[0] for c in cpu[1:]])
        payload.append(a)
        rate.append(1.0 / b if b > 0 else ZERO_COST_LINK_BPS)
    return VanLink(tuple(header), tuple(payload), tuple(rate))


def measure_anysource(world: int) -> float:
    """What a receive from any source costs more than a named one, with ``world`` ranks, s."""
    from backends.launch import spawn

    plain, anysource = spawn(anysource_ping_pong, world, backend="gloo", timeout=30)[0]
    return max(float(anysource) - float(plain), 0.0)
