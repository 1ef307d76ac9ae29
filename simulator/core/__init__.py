"""The simulator's core: trace, network, hardware, calibration file, and SimComm.

Read in this order: :mod:`~simulator.core.network` (links, contention, topologies),
:mod:`~simulator.core.hardware` (devices, clusters, presets), :mod:`~simulator.core.comm`
(rank programs and ``run_spmd``), :mod:`~simulator.core.kernel` (the event queue they run
on), :mod:`~simulator.core.engine` (the trace),
:mod:`~simulator.core.cores` (CPU cores shared by the ranks' computations). This machine's own
cluster, solved from its calibration, is the host tier above it (:mod:`simulator.host`); the
core imports nothing from there, and offers it one hook per link and per cluster, ``host``
(:mod:`~simulator.core.network.host_hooks`, :mod:`~simulator.core.host_hooks`), ``None`` in
the textbook tier.
"""

from simulator.core.calibration import CalibrationEntry, CalibrationError
from simulator.core.comm import SimComm, SimDeadlock, SimResult, SimWork, run_spmd
from simulator.core.engine import Span, Trace
from simulator.core.hardware import PRESETS, Cluster, Device, preset
from simulator.core.network import Link, Network, Topology

__all__ = [
    "PRESETS",
    "CalibrationEntry",
    "CalibrationError",
    "Cluster",
    "Device",
    "Link",
    "Network",
    "SimComm",
    "SimDeadlock",
    "SimResult",
    "SimWork",
    "Span",
    "Topology",
    "Trace",
    "preset",
    "run_spmd",
]
