"""Cross-device ops: how the replicas' gradients become one sum on every device (ch. 17).

In TensorFlow a ``MirroredStrategy`` hands the gradient reduction to a ``CrossDeviceOps``
object. Each one here takes ``k`` flat buffers, one per replica (on its device), and leaves
the SUM (or MEAN) of all of them in every buffer — an *all-reduce between the devices of one
process*. The three are TF's three choices, written on PyTorch tensors; a "transfer" between
devices is a copy (``tensor.to(device, copy=True)``: a real device-to-device copy on CUDA,
a memcpy standing for one on CPU "devices", as :mod:`backends.data_parallel` does):

* :class:`ReductionToOneDevice` (TF: ``tf.distribute.ReductionToOneDevice``) — copy every
  buffer to one device, add them there, copy the sum back: ``2(k−1)`` transfers of ``n``
  bytes, all through one device.
* :class:`RingAllReduce` (TF: ``tf.distribute.NcclAllReduce``; NCCL's ring on GPUs) — the
  buffers cut into ``k`` chunks; ``k−1`` reduce-scatter steps (replica ``r`` sends chunk
  ``r−s−1`` to ``r+1``, which adds it), then ``k−1`` all-gather steps (``r`` sends chunk
  ``r−s``, ``r+1`` keeps it). Every device sends ``2(k−1)/k·n`` bytes, no device more
  than another — the ring of chapter 2 (:mod:`backends.collectives.all_reduce`) between
  devices instead of processes. On GPUs the ``k`` transfers of a step run at once, each on
  its own link; here one thread makes them in turn.
* :class:`HierarchicalCopyAllReduce` (TF: ``tf.distribute.HierarchicalCopyAllReduce``, made
  for the DGX-1's two groups of four GPUs) — devices in groups of ``group_size``: reduce
  inside each group onto its first device, a ring all-reduce among those leaders, then copy
  back inside each group. Only the leaders cross between groups.

Every op packs the tensors it is given into flat buffers first (:meth:`CrossDeviceOps.
batch_reduce`; TF's ``batch_reduce`` and its "packs"): one all-reduce of a large buffer
instead of one per gradient. :class:`CollectiveAllReduce` (TF: ``CollectiveAllReduce``) is
the multi-*process* op of :mod:`backends.tf_distribute.multi_worker`: it adds the local
replicas, then runs our ring all-reduce between processes (:mod:`backends.collectives`).

Floating-point sums are added in a different order than on one device, so results agree with
a one-device sum to rounding, not bit for bit. Units: bytes, elements.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from backends.tf_distribute.values import PerReplica, ReduceOp, combine
from simulator.collectives.chunks import chunk_bounds
from simulator.tf_distribute.mirrored import groups_of


def _send(buf: Tensor, lo: int, hi: int, device: torch.device) -> Tensor:
    """Elements ``[lo, hi)`` of ``buf`` transferred to ``device`` (a copy)."""
    return buf[lo:hi].to(device, copy=True)


class CrossDeviceOps:
    """The reduction of per-replica tensors across devices (``tf.distribute.CrossDeviceOps``).

    A subclass defines :meth:`all_reduce` on one flat buffer per replica; :meth:`reduce` and
    :meth:`batch_reduce` are built on it.
    """

    def all_reduce(self, op: ReduceOp, buffers: Sequence[Tensor]) -> None:
        """Leave the ``op`` of every buffer in every buffer (one per replica, same size)."""
        raise NotImplementedError

    def reduce(self, op: ReduceOp, value: PerReplica, destination: torch.device) -> Tensor:
        """One tensor on ``destination``: the ``op`` of the replicas' components."""
        return combine(op, value.values, destination)

    def all_reduce_packs(self, op: ReduceOp, flats: Sequence[Tensor], num_packs: int = 1
                         ) -> None:
        """:meth:`all_reduce` of flat buffers (one per replica) cut into ``num_packs`` packs
        of equal size, reduced one after another (TF's ``num_packs``)."""
        for lo, hi in chunk_bounds(flats[0].numel(), num_packs):
            if hi > lo:
                self.all_reduce(op, [f[lo:hi] for f in flats])

    def batch_reduce(self, op: ReduceOp, per_replica: Sequence[Sequence[Tensor]],
                     num_packs: int = 1) -> list[list[Tensor]]:
        """All-reduce several tensors per replica (``per_replica[i]``: replica ``i``'s list,
        e.g. its gradients): packed into one flat buffer per replica (:func:`pack`),
        all-reduced in ``num_packs`` packs, unpacked. Returns the reduced tensors, replica by
        replica, in the given order and shapes; the inputs are left as they were."""
        flats = [pack(tensors) for tensors in per_replica]
        if flats and flats[0].numel():
            self.all_reduce_packs(op, flats, num_packs)
        return [unpack(f, tensors) for f, tensors in zip(flats, per_replica, strict=True)]


def pack(tensors: Sequence[Tensor]) -> Tensor:
    """The tensors copied into one flat buffer, in order (one message instead of many)."""
    if not tensors:
        return torch.zeros(0)
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def unpack(flat: Tensor, like: Sequence[Tensor]) -> list[Tensor]:
    """Views of ``flat`` shaped as ``like`` (the inverse of :func:`pack`)."""
    pieces = torch.split(flat, [t.numel() for t in like])
    return [p.view_as(t) for p, t in zip(pieces, like, strict=True)]


class ReductionToOneDevice(CrossDeviceOps):
    """Gather on one device, add, copy back (``tf.distribute.ReductionToOneDevice``).

    ``reduce_to`` is the index of the replica whose device adds (default 0).
    """

    def __init__(self, reduce_to: int = 0) -> None:
        self.reduce_to = reduce_to

    def all_reduce(self, op: ReduceOp, buffers: Sequence[Tensor]) -> None:
        """``k−1`` copies in, ``k−1`` additions, ``k−1`` copies out."""
        root = buffers[self.reduce_to]
        total = combine(op, [root, *(b for i, b in enumerate(buffers) if i != self.reduce_to)])
        for b in buffers:
            b.copy_(total.to(b.device))


class RingAllReduce(CrossDeviceOps):
    """Ring all-reduce between the devices of one process (the ``tf.distribute.NcclAllReduce``
    analogue): reduce-scatter then all-gather around the ring, ``k`` chunks."""

    def all_reduce(self, op: ReduceOp, buffers: Sequence[Tensor]) -> None:
        """``2(k−1)`` steps; in each, every replica sends one chunk to the next."""
        ring_all_reduce(buffers)
        if op is ReduceOp.MEAN:
            for b in buffers:
                b.div_(len(buffers))


def ring_all_reduce(buffers: Sequence[Tensor]) -> None:
    """SUM of the ``k`` buffers into each, around the ring ``0 → 1 → … → k−1 → 0``.

    Reduce-scatter, step ``s``: replica ``r`` sends chunk ``(r−s−1) mod k`` to ``r+1``, which
    adds it into its own; after ``k−1`` steps replica ``r`` holds chunk ``r`` whole.
    All-gather, step ``s``: replica ``r`` sends chunk ``(r−s) mod k`` to ``r+1``, which
    overwrites its own — the chunk schedule of chapter 2's ring
    (:func:`backends.collectives.all_reduce.ring_all_reduce`). In one step a replica never
    receives the chunk it sends, so the transfers of a step could all run at once (they do
    on GPUs).
    """
    k = len(buffers)
    bounds = chunk_bounds(buffers[0].numel(), k)
    for s in range(k - 1):  # reduce-scatter
        for r in range(k):
            lo, hi = bounds[(r - s - 1) % k]
            dst = buffers[(r + 1) % k]
            dst[lo:hi].add_(_send(buffers[r], lo, hi, dst.device))
    for s in range(k - 1):  # all-gather
        for r in range(k):
            lo, hi = bounds[(r - s) % k]
            dst = buffers[(r + 1) % k]
            dst[lo:hi].copy_(_send(buffers[r], lo, hi, dst.device))


class HierarchicalCopyAllReduce(CrossDeviceOps):
    """Reduce inside groups, ring among group leaders, copy back inside groups
    (``tf.distribute.HierarchicalCopyAllReduce``)."""

    def __init__(self, group_size: int = 2) -> None:
        groups_of(1, group_size)  # a clear error for a bad size
        self.group_size = group_size

    def all_reduce(self, op: ReduceOp, buffers: Sequence[Tensor]) -> None:
        """Three stages: group reduce → leaders' ring → group broadcast."""
        groups = groups_of(len(buffers), self.group_size)
        leaders = [buffers[g[0]] for g in groups]
        for g, lead in zip(groups, leaders, strict=True):  # 1. reduce onto each leader
            for i in g[1:]:
                lead.add_(buffers[i].to(lead.device, copy=True))
        if len(leaders) > 1:  # 2. all-reduce among the leaders
            ring_all_reduce(leaders)
        if op is ReduceOp.MEAN:
            for lead in leaders:
                lead.div_(len(buffers))
        for g, lead in zip(groups, leaders, strict=True):  # 3. copy back inside each group
            for i in g[1:]:
                buffers[i].copy_(lead.to(buffers[i].device, copy=True))


class CollectiveAllReduce(CrossDeviceOps):
    """All-reduce across processes (TF's ``CollectiveAllReduce``, the op of
    ``MultiWorkerMirroredStrategy``): the local replicas are added on the first local device,
    the sum is all-reduced between processes by one of our collectives
    (:mod:`backends.collectives.all_reduce`, ``implementation`` names it: ``ring`` by default,
    as TF's ``CommunicationImplementation.RING``), and copied back to the local replicas.

    ``world`` is the number of processes; MEAN divides by every replica of every process.
    """

    IMPLEMENTATIONS = ("ring", "segmented_ring", "recursive_doubling", "rabenseifner",
                       "reduce_broadcast")

    def __init__(self, implementation: str = "ring") -> None:
        if implementation not in self.IMPLEMENTATIONS:
            raise ValueError(f"unknown implementation {implementation!r}; choose one of "
                             f"{', '.join(self.IMPLEMENTATIONS)}")
        self.implementation = implementation

    def all_reduce(self, op: ReduceOp, buffers: Sequence[Tensor]) -> None:
        """Local sum, then the chosen collective between processes, then local copies."""
        import torch.distributed as dist

        from backends.collectives import all_reduce as algorithms

        local = buffers[0]
        for b in buffers[1:]:
            local.add_(b.to(local.device, copy=True))
        world = dist.get_world_size()
        if world > 1:
            getattr(algorithms, f"{self.implementation}_all_reduce")(local)
        if op is ReduceOp.MEAN:
            local.div_(world * len(buffers))
        for b in buffers[1:]:
            b.copy_(local.to(b.device, copy=True))
