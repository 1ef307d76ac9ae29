"""The parameter server, predicted and measured side by side (book ch. 3).

Prediction needs two kinds of primitives, neither measured on a parameter-server run:

* the machine's, from the calibration file (:mod:`lab.calibrate`): point-to-point α and B, the
  shared-bus bandwidth and busy latency of concurrent loopback messages, and the core count;
* the extra of a receive from any source (:func:`measure_anysource`, ping-pong);
* or, instead of the calibration's network terms, the van's messages
  (:func:`measure_van_link`, one launch at the run's world size): a request and its echo
  through the lab's own van, customer and app (:func:`app_echo`; or bare gloo sends shaped as
  the van's, :func:`van_echo`), from ``k`` senders to one node (the fan-in a server or worker
  has), timed as the CPU each message costs — on loopback moving a message is work of the
  host's cores. It counts that work but not a message's wait for a core on an oversubscribed
  host; on a 2-core machine it predicts too fast (``benchmarks/ps_accuracy.py --van`` prints
  both);
* the code's, measured here on **one process** (:func:`profile_costs`): coding a message
  header, waking a waiting thread, a server handling a push or a pull of ``n`` values (the
  :class:`~backends.parameter_server.KVStore` called directly), and a worker's gradient
  (:func:`profile_compute`, each call after a short sleep, as a worker computes after a wait)
  — the per-layer compute profile of DESIGN.md, for this model.

:func:`predict` builds :class:`simulator.parameter_server.PSSpec` from a
:class:`~backends.parameter_server.PSConfig` and these costs and simulates it on
``cluster_from_entry`` with the machine's cores shared by all ``1 + S + W`` ranks
(:class:`~simulator.parameter_server.CpuPool`): on a 2-core laptop five ranks oversubscribe the
cores, and the model says so instead of hiding it. Given a van link it runs on
:func:`~simulator.parameter_server.van_cluster` and spends each message's measured CPU on those
cores. :func:`compare` runs the real twin and the prediction for one configuration and returns
both (time per iteration, throughput, staleness, idle time).

Where each part lives:

* :mod:`.van` — the van's messages measured: ``measure_anysource``, ``measure_van_link``
  (``app_echo``, ``van_echo``);
* :mod:`.profile` — the code's costs on one process: ``profile_costs``, ``profile_compute``;
* :mod:`.prediction` — ``spec_for``, ``predict``, ``compare``.
"""

from lab.parameter_server.prediction import compare, costs_dict, predict, spec_for
from lab.parameter_server.profile import AFTER_WAIT_S, profile_compute, profile_costs
from lab.parameter_server.van import (
    VAN_PAYLOAD_SIZES,
    anysource_ping_pong,
    app_echo,
    measure_anysource,
    measure_van_link,
    van_echo,
)

__all__ = ["AFTER_WAIT_S", "VAN_PAYLOAD_SIZES", "anysource_ping_pong", "app_echo", "compare",
           "costs_dict", "measure_anysource", "measure_van_link", "predict", "profile_compute",
           "profile_costs", "spec_for", "van_echo"]
