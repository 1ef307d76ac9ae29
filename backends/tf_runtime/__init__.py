"""TensorFlow's distributed runtime, rebuilt on PyTorch (book chapters 15–16).

* :mod:`~backends.tf_runtime.cluster` — ``tf.train.ClusterSpec`` and device names
  (``tf.DeviceSpec``);
* :mod:`~backends.tf_runtime.graph` — a model captured with ``torch.fx`` as a ``GraphDef``,
  pruned to its fetches and placed on devices (the Placer);
* :mod:`~backends.tf_runtime.partition` — the graph split per task with Send/Recv pairs
  (``Partition()``);
* :mod:`~backends.tf_runtime.rendezvous` — the rendezvous keys and tables that Sends and Recvs
  meet in (``Rendezvous``, ``RendezvousMgr``);
* :mod:`~backends.tf_runtime.runtime` — ``GraphMgr`` (``RegisterGraph``/``RunGraph``) on every
  worker and the ``MasterSession`` on rank 0, over :func:`backends.launch.spawn`;
* :mod:`~backends.tf_runtime.measure` — rank programs that time steps, and the one-process
  per-node profile the simulated twin (:mod:`simulator.tf_runtime`) reads.
"""

from backends.tf_runtime.cluster import ClusterSpec, DeviceName
from backends.tf_runtime.graph import GraphDef, NodeDef, capture, place, prune
from backends.tf_runtime.partition import Partition, RecvOp, SendOp, partition
from backends.tf_runtime.rendezvous import parse_key, rendezvous_key
from backends.tf_runtime.runtime import GraphMgr, MasterSession, run_local, run_partition

__all__ = ["ClusterSpec", "DeviceName", "GraphDef", "GraphMgr", "MasterSession", "NodeDef",
           "Partition", "RecvOp", "SendOp", "capture", "parse_key", "partition", "place",
           "prune", "rendezvous_key", "run_local", "run_partition"]
