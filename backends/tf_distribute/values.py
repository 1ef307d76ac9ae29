"""Distributed values: what a value *is* when a strategy runs one replica per device (ch. 17).

A ``tf.distribute.Strategy`` runs the same step function on ``k`` replicas. Every value that
step sees or makes is then one of these:

* :class:`PerReplica` (TF: ``tf.distribute.DistributedValues``'s ``PerReplica``) — ``k``
  *different* values, one per replica: a replica's slice of the batch, its loss, its
  gradients. ``strategy.run`` returns them; ``strategy.reduce`` turns one into a single value.
* :class:`MirroredVariable` (TF: ``MirroredVariable``; ``VariableSynchronization.ON_WRITE``)
  — ``k`` copies of *one* value, one per device, kept equal: a model weight. Every write
  reaches every copy, so a read in any replica is local and costs nothing. The strategies keep
  the copies equal by giving every replica the same all-reduced gradient.
* :class:`SyncOnReadVariable` (TF: ``SyncOnReadVariable``; ``VariableSynchronization.ON_READ``)
  — ``k`` copies that may *differ*: each replica writes only its own (a metric's running sum,
  a sample count), and reading it outside the replicas aggregates them (``SUM`` or ``MEAN``,
  TF's ``VariableAggregation``). Writes are free, reads pay the reduction — the opposite
  trade to a mirrored variable.

:class:`ReduceOp` is ``tf.distribute.ReduceOp``: ``SUM`` and ``MEAN``. A replica reads "its"
component of a distributed value through :func:`local_value`, which asks the current replica
context (thread-local, set by the strategy while a replica runs) which replica it is.

Units: tensors are float32 unless a caller says otherwise; no times here.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor


class ReduceOp(enum.Enum):
    """How values of several replicas become one (``tf.distribute.ReduceOp``)."""

    SUM = "sum"
    MEAN = "mean"


class VariableSynchronization(enum.Enum):
    """When the copies of a variable agree (``tf.VariableSynchronization``): ``ON_WRITE``
    (mirrored: every write updates all copies) or ``ON_READ`` (each replica writes its own,
    a read aggregates them)."""

    ON_WRITE = "on_write"
    ON_READ = "on_read"


class VariableAggregation(enum.Enum):
    """How a sync-on-read variable's copies are combined on read (``tf.VariableAggregation``):
    ``SUM``, ``MEAN``, or ``ONLY_FIRST_REPLICA`` (the first copy, as is)."""

    SUM = "sum"
    MEAN = "mean"
    ONLY_FIRST_REPLICA = "only_first_replica"


def combine(op: ReduceOp | VariableAggregation, tensors: Sequence[Tensor],
            device: torch.device | None = None) -> Tensor:
    """The ``SUM`` / ``MEAN`` (or first) of ``tensors`` on ``device`` (default: the first
    one's), each other copied there first: the reduction every cross-device op ends in."""
    if not tensors:
        raise ValueError("nothing to reduce: no values")
    device = tensors[0].device if device is None else device
    if op is VariableAggregation.ONLY_FIRST_REPLICA:
        return tensors[0].to(device, copy=True)
    total = tensors[0].to(device, copy=True)
    for t in tensors[1:]:
        total.add_(t.to(device, copy=True))  # the transfer, then the addition
    if op.value == "mean":
        total.div_(len(tensors))
    return total


# ---- the replica context: which replica is running on this thread ------------------------

_context = threading.local()


def current_replica_id() -> int | None:
    """The replica running on this thread (``None`` outside ``strategy.run``: the
    *cross-replica context* in TF's words)."""
    return getattr(_context, "replica_id", None)


def in_cross_replica_context() -> bool:
    """Whether this thread runs outside every replica (TF: ``tf.distribute.in_cross_replica_
    context()``)."""
    return current_replica_id() is None


class replica_scope:
    """``with replica_scope(i, context):`` runs its block as replica ``i`` (the strategy's
    threads); ``replica_scope(None, None)`` runs it in the cross-replica context (a merge
    call's function). The previous context comes back on exit."""

    def __init__(self, replica_id: int | None, context: Any) -> None:
        self.replica_id, self.context = replica_id, context

    def __enter__(self) -> None:
        self.saved = (current_replica_id(), replica_context())
        _context.replica_id, _context.replica_context = self.replica_id, self.context

    def __exit__(self, *exc: object) -> None:
        _context.replica_id, _context.replica_context = self.saved


def replica_context() -> Any:
    """The running replica's context (its strategy's ``ReplicaContext``), or ``None``."""
    return getattr(_context, "replica_context", None)


# ---- the values ---------------------------------------------------------------------------

class DistributedValues:
    """One component per replica (``tf.distribute.DistributedValues``); ``values[i]`` is
    replica ``i``'s."""

    def __init__(self, values: Sequence[Any]) -> None:
        if not values:
            raise ValueError("a distributed value needs at least one component")
        self.values = tuple(values)

    def __len__(self) -> int:
        return len(self.values)

    def local(self) -> Any:
        """This replica's component (the first one in the cross-replica context)."""
        i = current_replica_id()
        return self.values[0 if i is None else i]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.values)!r})"


class PerReplica(DistributedValues):
    """Different values, one per replica (TF's ``PerReplica``): ``strategy.run``'s result."""


class MirroredVariable(DistributedValues):
    """One variable, one copy per device, kept equal (TF's ``MirroredVariable``).

    ``values[i]`` is the tensor replica ``i`` reads and trains (an ``nn.Parameter`` of its
    model copy). :meth:`assign` writes every copy; :meth:`in_sync` checks they agree.
    """

    synchronization = VariableSynchronization.ON_WRITE

    def __init__(self, values: Sequence[Tensor], name: str = "") -> None:
        super().__init__(values)
        self.name = name

    @classmethod
    def create(cls, initial: Tensor, devices: Sequence[torch.device], name: str = ""
               ) -> MirroredVariable:
        """Copies of ``initial`` on every device (the first one shares nothing with it)."""
        return cls([initial.detach().to(d, copy=True) for d in devices], name)

    def read_value(self) -> Tensor:
        """The local copy (any copy in the cross-replica context: they are equal)."""
        return self.local()  # type: ignore[no-any-return]

    @torch.no_grad()
    def assign(self, value: Tensor) -> None:
        """Write ``value`` to every copy (ON_WRITE synchronisation)."""
        for v in self.values:
            v.copy_(value.to(v.device))

    def in_sync(self, atol: float = 0.0) -> bool:
        """Whether every copy equals the first (within ``atol``)."""
        first = self.values[0].detach().cpu()
        return all(torch.allclose(v.detach().cpu(), first, rtol=0.0, atol=atol)
                   for v in self.values[1:])


class SyncOnReadVariable(DistributedValues):
    """Copies that each replica writes alone, aggregated on read (TF's ``SyncOnReadVariable``).

    Typical use is a metric: every replica ``assign_add``\\ s its batch's loss to its own copy;
    ``read_value`` outside the replicas returns their ``aggregation`` (``SUM`` or ``MEAN``).
    Inside a replica ``read_value`` returns that replica's own copy, as in TF.
    """

    synchronization = VariableSynchronization.ON_READ

    def __init__(self, initial: Tensor, devices: Sequence[torch.device],
                 aggregation: VariableAggregation = VariableAggregation.SUM,
                 reduce: Callable[[VariableAggregation, Sequence[Tensor]], Tensor] | None = None
                 ) -> None:
        super().__init__([initial.detach().to(d, copy=True) for d in devices])
        self.aggregation = aggregation
        self._reduce = reduce or combine

    @torch.no_grad()
    def assign_add(self, delta: Tensor) -> None:
        """Add ``delta`` to this replica's copy only (no communication)."""
        if in_cross_replica_context():
            raise RuntimeError("assign_add of a sync-on-read variable is per replica: call it "
                               "inside strategy.run")
        mine: Tensor = self.local()
        mine.add_(delta.to(mine.device))

    def read_value(self) -> Tensor:
        """The local copy in a replica; the aggregate of every copy outside them."""
        if not in_cross_replica_context():
            return self.local()  # type: ignore[no-any-return]
        return self._reduce(self.aggregation, self.values)

    @torch.no_grad()
    def reset(self) -> None:
        """Every copy to zero (a metric's ``reset_state``)."""
        for v in self.values:
            v.zero_()


def local_value(value: Any) -> Any:
    """``value`` as the running replica sees it: its component of a distributed value (a
    mirrored model is one too), the value itself otherwise; tuples, lists and dicts are mapped
    element by element."""
    if isinstance(value, DistributedValues):
        return value.local()
    if isinstance(value, (tuple, list)):
        return type(value)(local_value(v) for v in value)
    if isinstance(value, dict):
        return {k: local_value(v) for k, v in value.items()}
    return value


def regroup(results: Sequence[Any]) -> Any:
    """Per-replica results (one per replica, each of the same structure) as one structure of
    :class:`PerReplica` values — ``strategy.run``'s return: a tuple of losses becomes a
    ``PerReplica`` of losses; ``(loss, grads)`` a pair of them."""
    first = results[0]
    if isinstance(first, (tuple, list)):
        return type(first)(regroup([r[i] for r in results]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: regroup([r[k] for r in results]) for k in first}
    if first is None:
        return None
    return PerReplica(results)
