"""Join: training on uneven inputs, where some ranks run out of batches before others.

Book chapter 6; the real twin of ``torch.distributed.algorithms.Join`` (PyTorch ≥ 1.10), from
scratch. Without it, a rank that has finished leaves the training loop while the others still
call all-reduce in their backward: they wait for it until the process group times out.

With it, every rank trains inside ``with Join([model]):`` and the protocol is:

* each step, a rank still training announces itself: at the start of its forward the
  joinable calls :meth:`Join.notify_join_context`, which all-reduces a **1**;
* a rank that has run out of inputs leaves the ``with`` body and, in :meth:`Join.__exit__`,
  loops: all-reduce a **0** (the same collective the others' 1 meets), read how many ranks
  are still training, and if any are, run every joinable's *main hook* — for DDP, the
  **shadow** of one step's collectives (buffer broadcast, every bucket all-reduced with zero
  gradients), so the trainers' collectives find a partner;
* when the count comes back 0 every rank has joined; each joinable's *post hook* runs with
  ``is_last_joiner`` (whether this rank was among the last ranks training) — DDP broadcasts
  the final model from a last joiner, because early joiners skipped the last optimizer steps.

Gradients are still divided by the initial world size (PyTorch's default,
``divide_by_initial_world_size=True``): a joined rank contributes zeros.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Protocol

import torch
import torch.distributed as dist

from backends.device import device


@dataclass(frozen=True)
class JoinHook:
    """What a joinable does while others still train (``main_hook()``) and at the end
    (``post_hook(is_last_joiner)``)."""

    main_hook: Callable[[], None]
    post_hook: Callable[[bool], None]


class Joinable(Protocol):
    """A participant of :class:`Join`: it shadows its own collectives."""

    def join_hook(self) -> JoinHook: ...

    @property
    def join_process_group(self) -> Any: ...


class Join:
    """Context manager for uneven inputs over ``joinables`` (the first one's group counts)."""

    _current: ClassVar[Join | None] = None

    def __init__(self, joinables: Sequence[Joinable], enable: bool = True) -> None:
        if not joinables:
            raise ValueError("Join needs at least one joinable")
        self.joinables = list(joinables)
        self.enable = enable
        self.group = joinables[0].join_process_group

    def __enter__(self) -> Join:
        if Join._current is not None:
            raise RuntimeError("Join contexts cannot be nested")
        Join._current = self
        return self

    @staticmethod
    def notify_join_context(joinable: Joinable) -> None:
        """Called by a joinable at the start of each step: "I am still training" (a 1)."""
        join = Join._current
        if join is None or not join.enable or joinable is not join.joinables[0]:
            return
        dist.all_reduce(torch.ones(1, dtype=torch.int64, device=device()), group=join.group)

    def _still_training(self) -> int:
        count = torch.zeros(1, dtype=torch.int64, device=device())
        dist.all_reduce(count, group=self.group)
        return int(count)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        Join._current = None
        if not self.enable or kind is not None:
            return  # an exception propagates as it is
        hooks = [j.join_hook() for j in self.joinables]
        is_last_joiner = True
        while self._still_training() > 0:
            for hook in hooks:
                hook.main_hook()
            is_last_joiner = False
        for hook in hooks:
            hook.post_hook(is_last_joiner)
