"""tf.distribute's strategies as real twins on PyTorch (book chapters 17–19).

TensorFlow's ``tf.distribute.Strategy`` is one API — ``run`` a step function on every
replica, ``reduce`` what it returns, variables created once and kept per device — over
several ways of placing replicas. These modules write each way from scratch on PyTorch, with
TF's names; each docstring names the TF class it stands for:

* :mod:`~backends.tf_distribute.values` — ``PerReplica``, ``MirroredVariable``,
  ``SyncOnReadVariable``, ``tf.distribute.ReduceOp``, ``VariableSynchronization``,
  ``VariableAggregation`` (ch. 17);
* :mod:`~backends.tf_distribute.cross_device_ops` — ``ReductionToOneDevice``, the ring
  all-reduce between devices (``NcclAllReduce``), ``HierarchicalCopyAllReduce``,
  ``CollectiveAllReduce`` (ch. 17);
* :mod:`~backends.tf_distribute.mirrored` — ``MirroredStrategy``: replicas on the devices of
  one process, in threads (ch. 18);
* :mod:`~backends.tf_distribute.multi_worker` — ``MultiWorkerMirroredStrategy``: one replica
  per process, the gradient all-reduce by our collectives (ch. 18);
* :mod:`~backends.tf_distribute.measure` — timing a training step of each (the real side of
  the ``tf.mirrored`` and ``tf.multi_worker_mirrored`` twins).

The chapter-19 modules (``ParameterServerStrategy``, ``ClusterCoordinator``) live beside them
and are imported by their own names.
"""

from backends.tf_distribute.cross_device_ops import (
    CollectiveAllReduce,
    CrossDeviceOps,
    HierarchicalCopyAllReduce,
    ReductionToOneDevice,
    RingAllReduce,
)
from backends.tf_distribute.mirrored import (
    SGD,
    MirroredModule,
    MirroredStrategy,
    ReplicaContext,
    compute_average_loss,
    train_step,
)
from backends.tf_distribute.multi_worker import MultiWorkerMirroredStrategy
from backends.tf_distribute.values import (
    MirroredVariable,
    PerReplica,
    ReduceOp,
    SyncOnReadVariable,
    VariableAggregation,
    VariableSynchronization,
)

__all__ = ["SGD", "CollectiveAllReduce", "CrossDeviceOps", "HierarchicalCopyAllReduce",
           "MirroredModule", "MirroredStrategy", "MirroredVariable",
           "MultiWorkerMirroredStrategy", "PerReplica", "ReduceOp", "ReductionToOneDevice",
           "ReplicaContext", "RingAllReduce", "SyncOnReadVariable", "VariableAggregation",
           "VariableSynchronization", "compute_average_loss", "train_step"]
