"""The communication module: activations forward, gradients backward, point to point.

Between neighbouring stages a pipeline moves exactly two things per micro-batch: the
activation that stage ``k`` hands to stage ``k + 1`` in the forward pass, and the gradient of
that activation that stage ``k + 1`` hands back in the backward pass. PipeDream's
communication module (Narayanan et al., SOSP 2019, §4; book ch. 11) and
``torch.distributed.pipelining``'s stages both agree on the tensors' shapes and dtypes once,
allocate receive buffers of those shapes, and from then on only move bytes. So do we:

1. :meth:`StageComm.send_meta` / :meth:`StageComm.recv_meta` — once, before the first step,
   each stage tells the next the shape and dtype of every micro-batch's activation (one small
   int64 tensor);
2. :meth:`StageComm.allocate` — fixed receive buffers, one per micro-batch and direction;
3. every step, :meth:`StageComm.post_receives` posts all of a stage's ``irecv`` s up front
   and the sends are ``isend`` s: gloo moves the bytes on its own threads while the rank
   computes — the CPU counterpart of torchgpipe's separate copy streams (Kim et al. 2020,
   §3.5) — and a rank only blocks in :meth:`wait_activation` / :meth:`wait_gradient` when
   its input has not arrived yet (that wait *is* the bubble).

Every message carries a tag naming its boundary, micro-batch and direction, so messages of
different micro-batches can never be confused, whatever order the schedule sends them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from backends.device import device
from backends.trace import Tracer, span

MAX_DIMS = 6
"""Largest activation rank the metadata message can describe."""

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.uint8, torch.bool)
"""The dtypes an activation may have, by their code in the metadata message."""


@dataclass(frozen=True)
class TensorMeta:
    """Shape and dtype of one activation (its gradient has the same)."""

    shape: tuple[int, ...]
    dtype: torch.dtype

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorMeta:
        """The metadata of ``tensor``."""
        return cls(tuple(tensor.shape), tensor.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of a tensor of this shape and dtype."""
        n = 1
        for d in self.shape:
            n *= d
        return n * torch.empty((), dtype=self.dtype).element_size()

    def empty(self) -> torch.Tensor:
        """A new uninitialised tensor of this shape and dtype, on the rank's device
        (:func:`backends.device.device`)."""
        return torch.empty(self.shape, dtype=self.dtype, device=device())


def encode(metas: Sequence[TensorMeta]) -> torch.Tensor:
    """Metadata of ``len(metas)`` activations as one int64 tensor: ``[dtype, ndim, dims…]``."""
    out = torch.zeros(len(metas), 2 + MAX_DIMS, dtype=torch.int64)
    for row, meta in zip(out, metas, strict=True):
        if len(meta.shape) > MAX_DIMS or meta.dtype not in DTYPES:
            raise ValueError(f"cannot send an activation of shape {meta.shape} and dtype "
                             f"{meta.dtype}: at most {MAX_DIMS} dimensions, dtypes {DTYPES}")
        row[0], row[1] = DTYPES.index(meta.dtype), len(meta.shape)
        row[2:2 + len(meta.shape)] = torch.tensor(meta.shape, dtype=torch.int64)
    return out


def decode(message: torch.Tensor) -> list[TensorMeta]:
    """The inverse of :func:`encode`."""
    return [TensorMeta(tuple(int(d) for d in row[2:2 + int(row[1])]), DTYPES[int(row[0])])
            for row in message]


FORWARD, BACKWARD = 0, 1
"""Directions: activations go forward (stage k → k+1), gradients backward (k+1 → k)."""


class StageComm:
    """The point-to-point links of one rank's stages.

    Args:
        ranks: the global rank of each pipeline rank, in pipeline order (``ranks[r]`` runs
            the virtual stages ``r, r + p, …``).
        group: the process group the ranks belong to (``None``: the default group).
        stages: the number of virtual stages (``p · chunks``).
        microbatches: micro-batches per step.
        tracer: where ``send``/``recv`` spans go (``None``: not traced).
    """

    def __init__(self, ranks: Sequence[int], group: Any, stages: int, microbatches: int,
                 tracer: Tracer | None = None) -> None:
        self.ranks = list(ranks)
        self.group = group
        self.stages = stages
        self.microbatches = microbatches
        self.tracer = tracer
        self._buffers: dict[tuple[int, int, int], torch.Tensor] = {}
        self._recvs: dict[tuple[int, int, int], Any] = {}
        self._sends: list[Any] = []
        self._expected: dict[tuple[int, int, int], TensorMeta] = {}

    def peer(self, stage: int) -> int:
        """The global rank that runs virtual stage ``stage``."""
        return self.ranks[stage % len(self.ranks)]

    def tag(self, boundary: int, microbatch: int, direction: int) -> int:
        """The tag of the message crossing into stage ``boundary`` (forward) or out of it
        (backward) for ``microbatch``."""
        return (boundary * self.microbatches + microbatch) * 2 + direction

    # ---- once: shapes and dtypes ---------------------------------------------------------

    def send_meta(self, stage: int, metas: Sequence[TensorMeta]) -> None:
        """Tell stage ``stage + 1`` the shape and dtype of each micro-batch's activation."""
        dist.send(encode(metas).to(device()), self.peer(stage + 1), group=self.group,
                  tag=self.tag(stage + 1, 0, FORWARD))

    def recv_meta(self, stage: int) -> list[TensorMeta]:
        """What stage ``stage − 1`` will send stage ``stage``, per micro-batch."""
        message = torch.zeros(self.microbatches, 2 + MAX_DIMS, dtype=torch.int64,
                              device=device())
        dist.recv(message, self.peer(stage - 1), group=self.group,
                  tag=self.tag(stage, 0, FORWARD))
        return decode(message)

    def allocate(self, stage: int, inputs: Sequence[TensorMeta] | None,
                 outputs: Sequence[TensorMeta] | None) -> None:
        """Fixed receive buffers of stage ``stage``: its inputs (activations from
        ``stage − 1``; ``None`` for the first stage) and its outputs' gradients (from
        ``stage + 1``; ``None`` for the last; floating-point outputs only)."""
        for i, meta in enumerate(inputs or ()):
            self._buffers[(stage, i, FORWARD)] = meta.empty()
            if meta.dtype.is_floating_point:
                self._expected[(stage, i, BACKWARD)] = meta  # the gradient we send back
        for i, meta in enumerate(outputs or ()):
            if meta.dtype.is_floating_point:  # integer outputs have no gradient
                self._buffers[(stage, i, BACKWARD)] = meta.empty()
            self._expected[(stage + 1, i, FORWARD)] = meta  # the activation we send on

    # ---- every step ----------------------------------------------------------------------

    def post_receives(self, stage: int) -> None:
        """Post every receive of stage ``stage`` for one step, into its fixed buffers."""
        for (k, i, direction), buf in self._buffers.items():
            if k != stage:
                continue
            src = stage - 1 if direction == FORWARD else stage + 1
            boundary = stage if direction == FORWARD else stage + 1
            self._recvs[(k, i, direction)] = dist.irecv(
                buf, self.peer(src), group=self.group, tag=self.tag(boundary, i, direction))

    def _wait(self, stage: int, microbatch: int, direction: int) -> torch.Tensor:
        key = (stage, microbatch, direction)
        what = "activation" if direction == FORWARD else "gradient"
        if key not in self._recvs:
            raise RuntimeError(f"stage {stage} has no receive posted for the {what} of "
                               f"micro-batch {microbatch}")
        buf = self._buffers[key]
        with span(self.tracer, "recv", f"recv {what} {microbatch}", buf.nbytes):
            self._recvs.pop(key).wait()
        return buf

    def wait_activation(self, stage: int, microbatch: int) -> torch.Tensor:
        """The input of ``microbatch`` at ``stage`` (blocks until it has arrived)."""
        return self._wait(stage, microbatch, FORWARD)

    def wait_gradient(self, stage: int, microbatch: int) -> torch.Tensor:
        """The gradient of ``stage``'s output of ``microbatch`` (blocks until it arrived)."""
        return self._wait(stage, microbatch, BACKWARD)

    def _send(self, tensor: torch.Tensor, dst_stage: int, boundary: int, microbatch: int,
              direction: int) -> None:
        expected = self._expected.get((boundary, microbatch, direction))
        if expected is not None and TensorMeta.of(tensor) != expected:
            raise RuntimeError(f"a stage sends {TensorMeta.of(tensor)} across boundary "
                               f"{boundary} for micro-batch {microbatch} but the stages "
                               f"agreed on {expected}")
        what = "activation" if direction == FORWARD else "gradient"
        with span(self.tracer, "send", f"send {what} {microbatch}", tensor.nbytes):
            work = dist.isend(tensor.contiguous(), self.peer(dst_stage), group=self.group,
                              tag=self.tag(boundary, microbatch, direction))
        self._sends.append((work, tensor))  # keep the tensor alive until the send is done

    def send_activation(self, stage: int, microbatch: int, tensor: torch.Tensor) -> None:
        """Send ``stage``'s output of ``microbatch`` to ``stage + 1`` (non-blocking)."""
        self._send(tensor, stage + 1, stage + 1, microbatch, FORWARD)

    def send_gradient(self, stage: int, microbatch: int, tensor: torch.Tensor) -> None:
        """Send the gradient of ``stage``'s input of ``microbatch`` to ``stage − 1``."""
        self._send(tensor, stage - 1, stage, microbatch, BACKWARD)

    def finish(self) -> None:
        """Wait for every send of this step to complete."""
        for work, _ in self._sends:
            work.wait()
        self._sends.clear()
        if self._recvs:
            left = sorted(self._recvs)
            self._recvs.clear()
            raise RuntimeError(f"receives posted but never used: {left}")
