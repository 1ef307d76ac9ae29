"""Rank program for grading capstone 10.4 on real processes: the student's 1F1B runtime
(``OneFOneB``) beside ``torch.distributed.pipelining`` on the same split model.

:func:`grade` runs, at one world size ``p``, every micro-batch count of :data:`CASES` for
:data:`STEPS` SGD steps and reports per case:

* the losses, and the largest parameter and gradient differences from PyTorch's
  ``Schedule1F1B`` on the same split (``ScheduleGPipe`` where ``m < p``: PyTorch's 1F1B
  refuses fewer micro-batches than stages, and a flushed pipeline's numbers do not depend
  on the order of its actions);
* the actions the stage executed, in order (its ``forward_step``/``backward_step`` calls,
  recorded by wrapping them);
* the peak bytes saved for backward during a step (:class:`backends.pipeline.memory.
  ActivationCounter`) beside one micro-batch's;
* the stage's *event log* of each step (:class:`EventLog`): where its compute begins and
  ends and where it posts a send or finishes a receive — no clock in it, only the order,
  so the host's load cannot change it.

A stub is reported as ``{"todo": …}``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import distributed_c10d as c10d

from backends.pipeline.builtin import BuiltinPipeline
from backends.pipeline.memory import ActivationCounter
from backends.pipeline.models import mlp
from backends.pipeline.partition import partition
from exercises import load

CASES = {2: (1, 3, 4), 3: (2, 5, 6), 4: (3, 6, 8)}
"""Micro-batch counts per world size: fewer than the stages, not a multiple of them, and a
multiple."""
BALANCES = {2: (2, 1), 3: (1, 2, 1), 4: (2, 1, 1, 1)}
"""Blocks per stage: uneven, so every stage's share of the model differs from the next's."""
WIDTH, HIDDEN, ROWS, STEPS = 6, 10, 2, 2
"""Block width and hidden width, examples per micro-batch, SGD steps compared."""


def runtime_class() -> Any:
    """The ``OneFOneB`` under grade (``DISTML_IMPL`` picks the student's or the reference)."""
    return load("ch10_capstone_1f1b").OneFOneB


def data(batch: int, width: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step ``step``'s inputs and targets, the same on every rank."""
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(batch, width, generator=g), torch.randn(batch, width, generator=g)


def _microbatch_bytes(module: nn.Module, rows: int, first: bool, last: bool) -> int:
    """Bytes one micro-batch saves for backward on this stage (its loss too, on the last)."""
    counter = ActivationCounter(module.parameters())
    x = torch.zeros(rows, WIDTH, requires_grad=not first)
    with counter.count():
        y = module(x)
        if last:
            y = nn.functional.mse_loss(y, torch.zeros_like(y))
        live = counter.live_bytes
    del y
    return live


@contextmanager
def _recorded(runtime: Any, log: list[tuple[str, int]]) -> Iterator[None]:
    """Append ``(kind, microbatch)`` to ``log`` on every ``forward_step``/``backward_step``."""
    calls = {"F": runtime.forward_step, "B": runtime.backward_step}

    def wrap(kind: str) -> Callable[[int], None]:
        def step(i: int) -> None:
            log.append((kind, int(i)))
            calls[kind](i)
        return step

    runtime.forward_step, runtime.backward_step = wrap("F"), wrap("B")
    try:
        yield
    finally:
        del runtime.forward_step, runtime.backward_step


class EventLog:
    """This rank's compute and point-to-point events, in the order they happen.

    ``F<``/``F>`` and ``B<``/``B>`` open and close a forward of the stage module and a
    ``torch.autograd.backward``; ``send next``/``send prev`` is a send posted
    (``dist.isend``, or the ``isend`` inside ``dist.send``) to the next/previous stage;
    ``recv next``/``recv prev`` a receive finished (``dist.recv``, or ``wait()`` on a
    ``dist.irecv``'s work) from it.
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.events: list[str] = []

    def _role(self, peer: int) -> str:
        return "next" if peer == dist.get_rank() + 1 else "prev"

    @contextmanager
    def installed(self) -> Iterator[None]:
        events, role = self.events, self._role
        real_isend, real_irecv, real_backward = c10d.isend, c10d.irecv, torch.autograd.backward

        def isend(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            events.append(f"send {role(_peer(real_isend, tensor, args, kwargs))}")
            return real_isend(tensor, *args, **kwargs)

        def irecv(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            peer = _peer(real_irecv, tensor, args, kwargs)
            work = real_irecv(tensor, *args, **kwargs)
            return None if work is None else _Waited(work, lambda: events.append(
                f"recv {role(peer)}"))

        def backward(*args: Any, **kwargs: Any) -> Any:
            events.append("B<")
            real_backward(*args, **kwargs)
            events.append("B>")

        handles = [self.module.register_forward_pre_hook(lambda *_: events.append("F<")),
                   self.module.register_forward_hook(lambda *_: events.append("F>"))]
        patched = [(m, name) for m in (dist, c10d) for name in ("isend", "irecv")]
        saved = [(m, name, getattr(m, name)) for m, name in patched]
        for m, name in patched:
            setattr(m, name, isend if name == "isend" else irecv)
        torch.autograd.backward = backward
        try:
            yield
        finally:
            torch.autograd.backward = real_backward
            for m, name, original in saved:
                setattr(m, name, original)
            for h in handles:
                h.remove()


def _peer(fn: Callable[..., Any], tensor: torch.Tensor, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> int:
    """The global rank an ``isend``/``irecv`` call names (``dst``/``src`` or the group's)."""
    bound: dict[str, Any] = dict(inspect.signature(fn).bind(tensor, *args, **kwargs).arguments)
    peer = bound.get("dst", bound.get("src"))
    if peer is not None:
        return int(peer)
    local = int(bound["group_dst"] if "group_dst" in bound else bound["group_src"])
    return dist.get_global_rank(bound["group"], local) if bound.get("group") else local


class _Waited:
    """A receive's work handed to the code under test: ``wait()`` notes the event."""

    def __init__(self, work: Any, done: Callable[[], None]) -> None:
        self._work, self._done = work, done

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        result = self._work.wait(*args, **kwargs)
        self._done()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


def _parity(p: int, m: int) -> dict[str, Any]:
    rank = dist.get_rank()
    first, last = rank == 0, rank == p - 1
    batch = ROWS * m
    balance = BALANCES[p]
    module = partition(mlp(sum(balance), WIDTH, HIDDEN, seed=3), balance)[rank]
    one = _microbatch_bytes(module, ROWS, first, last)
    opt = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    runtime = runtime_class()(module, rank, p, m, batch, WIDTH, opt)
    counter = ActivationCounter(module.parameters())
    trace = EventLog(module)
    losses, actions, peaks, events = [], [], [], []
    for step in range(STEPS):
        x, t = data(batch, WIDTH, step)
        log: list[tuple[str, int]] = []
        counter.reset_peak()
        trace.events.clear()
        with _recorded(runtime, log), counter.count(), trace.installed():
            losses.append(runtime.train_step(x if first else None, t if last else None))
        actions.append(log)
        peaks.append(counter.peak_bytes)
        events.append(list(trace.events))
    dist.barrier()  # every message of ours delivered before PyTorch's pipeline starts
    theirs = BuiltinPipeline(partition(mlp(sum(balance), WIDTH, HIDDEN, seed=3), balance)[rank],
                             rank, p, m, "1f1b" if m >= p else "gpipe")
    their_opt = torch.optim.SGD(theirs.module.parameters(), lr=0.1, momentum=0.9)
    their_losses = []
    for step in range(STEPS):
        x, t = data(batch, WIDTH, step)
        their_opt.zero_grad(set_to_none=True)
        their_losses.append(theirs.step(x if first else None, t if last else None))
        their_opt.step()
    dist.barrier()
    pairs = list(zip(module.parameters(), theirs.module.parameters(), strict=True))
    grads = [(a.grad, b.grad) for a, b in pairs if a.grad is not None and b.grad is not None]
    return {
        "m": m, "losses": losses, "their_losses": their_losses,
        "param_diff": max(float((a - b).detach().abs().max()) for a, b in pairs),
        "grad_diff": (None if len(grads) < len(pairs)  # a parameter left without .grad
                      else max(float((a - b).abs().max()) for a, b in grads)),
        "actions": actions, "peaks": peaks, "microbatch_bytes": one, "events": events,
    }


def grade() -> dict[str, Any]:
    """Every case at this world size; a stub's ``NotImplementedError`` makes the whole
    report ``{"todo": …}``."""
    torch.set_num_threads(1)
    p = dist.get_world_size()
    try:
        report: dict[str, Any] = {"cases": [_parity(p, m) for m in CASES[p]]}
    except NotImplementedError as exc:
        return {"todo": f"not implemented: {exc}"}
    return report
