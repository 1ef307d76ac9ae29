"""tf.distribute's strategies, simulated (book chapters 17–19): twins of
:mod:`backends.tf_distribute`.

* :mod:`~simulator.tf_distribute.mirrored` — one training step of ``MirroredStrategy``
  (replica threads of one host, the cross-device all-reduce run by one thread) and of
  ``MultiWorkerMirroredStrategy`` (one worker per rank, the ring all-reduce on the calibrated
  cluster).

The chapter-19 model (``ParameterServerStrategy``) lives beside it, imported by its own name.
"""

from simulator.tf_distribute.mirrored import (
    CROSS_DEVICE_OPS,
    HostRates,
    StepPrediction,
    replica_rows,
    simulate_mirrored,
    simulate_multi_worker,
)

__all__ = ["CROSS_DEVICE_OPS", "HostRates", "StepPrediction", "replica_rows",
           "simulate_mirrored", "simulate_multi_worker"]
