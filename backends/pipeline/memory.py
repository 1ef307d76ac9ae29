"""Counting activation memory with saved-tensor hooks.

On a GPU one would read the caching allocator's statistics; a CPU has none. What a pipeline
stage keeps alive between a micro-batch's forward and its backward is exactly the set of
tensors autograd *saves for backward*, and PyTorch lets us watch that set:
``torch.autograd.graph.saved_tensors_hooks(pack, unpack)`` calls ``pack`` for every tensor an
operation saves. Our ``pack`` wraps the tensor in a small holder; the holder is freed when
autograd frees the saved tensor (after the backward ran, or when the graph is dropped), and
its finaliser takes the bytes off the count. So :class:`ActivationCounter` knows the live
activation bytes at every moment and keeps their peak.

Two details make the count honest:

* one tensor saved by several operations (a ReLU's output is also the next Linear's input)
  is counted once — a reference count per tensor (its data pointer and size);
* parameters are saved too (a Linear saves its weight) but are not activations: storages of
  the module's parameters are excluded.

Activation checkpointing (:mod:`torch.utils.checkpoint`, non-reentrant) saves only the
stage's input during the forward — that goes through our hooks and is counted. During the
backward it recomputes the forward under hooks of its own, which ours cannot see; the runtime
adds that transient explicitly with :meth:`ActivationCounter.transient` (the recomputed
micro-batch's full activation, measured once by this same counter on an un-checkpointed
forward of the same shape).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


class _Held:
    """A saved tensor, as autograd keeps it while our hooks are active."""

    __slots__ = ("__weakref__", "counter", "key", "tensor")

    def __init__(self, counter: ActivationCounter, key: tuple[int, int],
                 tensor: torch.Tensor) -> None:
        self.counter, self.key, self.tensor = counter, key, tensor

    def __del__(self) -> None:
        self.counter._release(self.key)


class ActivationCounter:
    """Live and peak bytes of the activations saved for backward.

    Args:
        exclude: tensors (parameters) whose storages are never counted.
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self._excluded = {t.untyped_storage().data_ptr() for t in exclude}
        self._refs: dict[tuple[int, int], list[int]] = {}  # tensor -> [references, bytes]
        self.live_bytes = 0
        self.peak_bytes = 0

    def _pack(self, tensor: torch.Tensor) -> Any:
        if tensor.untyped_storage().data_ptr() in self._excluded:
            return tensor
        # a tensor is counted by its own bytes (a micro-batch is a view of the mini-batch:
        # its share, not the whole storage); the same tensor saved twice is counted once
        key = (tensor.data_ptr(), tensor.numel() * tensor.element_size())
        if key[1] == 0:
            return tensor
        entry = self._refs.setdefault(key, [0, key[1]])
        if entry[0] == 0:
            self.live_bytes += entry[1]
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        entry[0] += 1
        return _Held(self, key, tensor)

    @staticmethod
    def _unpack(held: Any) -> torch.Tensor:
        return held.tensor if isinstance(held, _Held) else held

    def _release(self, key: tuple[int, int]) -> None:
        entry = self._refs[key]
        entry[0] -= 1
        if entry[0] == 0:
            self.live_bytes -= entry[1]
            del self._refs[key]

    @contextmanager
    def count(self) -> Iterator[None]:
        """Count every tensor saved for backward inside the ``with`` block."""
        with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
            yield

    def transient(self, nbytes: int) -> None:
        """Note that ``nbytes`` more are alive for a moment (a recomputation) on top of the
        live count."""
        self.peak_bytes = max(self.peak_bytes, self.live_bytes + nbytes)

    def reset_peak(self) -> None:
        """Start a new peak from the current live count."""
        self.peak_bytes = self.live_bytes


def saved_bytes(module: torch.nn.Module, example: torch.Tensor,
                requires_grad: bool = True) -> int:
    """Activation bytes ``module`` saves for backward on ``example``; with ``requires_grad``
    the input requires grad (when floating point), as a later stage's received input does."""
    counter = ActivationCounter(module.parameters())
    x = example.detach()
    if requires_grad and x.is_floating_point():
        x.requires_grad_()
    with counter.count():
        out = module(x)
    peak = counter.live_bytes
    del out
    return peak
