"""The rank programs behind chapters 1–2's twins: what each rank runs when the lab checks and
times a registered twin (``ping_pong``, ``stream``, ``one_to_all`` and every ``op.algorithm``
collective) against PyTorch's built-in.

The twin registry (:mod:`lab.twins`) names these functions; a launch hands the rank programs
:func:`measure_twin` and :func:`trace_twin` a *lookup* (``name → twin``, the registry's
``get_twin``) so that they find a twin's real side by name without this package importing
``lab``:

* per twin, inside a rank: ``*_step(nbytes, tracer)`` allocates the buffers and returns a
  zero-argument function that runs the operation once; ``*_check(nbytes)`` runs it once and
  compares the result with PyTorch's own (:func:`builtin_call`, ``dist.broadcast``), raising
  if they differ;
* the rank programs: :func:`measure_twin` times a sweep of sizes (seconds per call, PyTorch's
  built-in interleaved in the same rounds), :func:`trace_twin` records one run's spans.

Collective buffers are float32, the reduction SUM, the root rank 0; ``nbytes`` is the
operation's ``n`` (:func:`effective_nbytes`). Point-to-point buffers are bytes (uint8). Torch
is imported inside the functions, so that the registry can name them without loading torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from simulator.core.calibration import SUSTAINED_REPEAT_S

if TYPE_CHECKING:
    import torch

ITEMSIZE = 4  # float32
PIECEWISE = {"scatter", "gather", "all_gather", "reduce_scatter", "all_to_all"}
"""The collectives whose buffer is cut into p equal pieces, one per rank."""
ROOTED = {"broadcast": "src", "scatter": "src", "gather": "dst", "reduce": "dst"}
"""The rooted collectives and the name of their root argument."""


class RealTwin(Protocol):
    """A twin's real side, as the registry holds it (:class:`lab.twins.Twin`)."""

    @property
    def name(self) -> str: ...
    @property
    def real_step(self) -> Callable[[int, Any], Callable[[], None]]: ...
    @property
    def check(self) -> Callable[[int], None]: ...
    @property
    def builtin_step(self) -> Callable[[int], Callable[[], None]] | None: ...


TwinLookup = Callable[[str], RealTwin]
"""``name → twin``: how a rank program finds a registered twin (the registry's ``get_twin``)."""


# ---- the rank programs --------------------------------------------------------------------

def measure_twin(lookup: TwinLookup, name: str, sizes: Sequence[int],
                 repeats: int) -> list[dict[str, Any]]:
    """Rank function: check the real twin against PyTorch once, then time each size (bytes) —
    and, for a collective, PyTorch's built-in side by side, interleaved in the same rounds.
    Each repeat runs its operation back to back for about :data:`SUSTAINED_REPEAT_S`, as the
    calibration times the primitives the prediction is built from; a row's ``calls`` is how
    many calls that was (its times, ``median_s`` …, are seconds per call; a collective's row
    also has ``builtin_median_s``)."""
    from backends.measure import measure_many

    twin = lookup(name)
    twin.check(min(sizes, default=0))
    steps = [twin.real_step(nbytes, None) for nbytes in sizes]
    if twin.builtin_step is not None:
        steps += [twin.builtin_step(nbytes) for nbytes in sizes]
    timings = [t.as_dict() for t in measure_many(steps, repeats=repeats,
                                                 repeat_s=SUSTAINED_REPEAT_S)]
    ours, builtin = timings[:len(sizes)], timings[len(sizes):]
    for row, other in zip(ours, builtin, strict=False):
        row["builtin_median_s"] = other["median_s"]
    return ours


def trace_twin(lookup: TwinLookup, name: str, nbytes: int) -> list[dict[str, Any]]:
    """Rank function: one warm run, then one traced run; every rank's spans (trace records,
    times in seconds on this host's clock)."""
    import torch.distributed as dist

    from backends.trace import Tracer

    tracer = Tracer()
    step = lookup(name).real_step(nbytes, tracer)
    step()
    dist.barrier()
    tracer.trace.spans.clear()
    step()
    return tracer.gather().to_records()


# ---- the collectives ----------------------------------------------------------------------

def effective_nbytes(operation: str, world: int, nbytes: int) -> int:
    """``nbytes`` rounded down to whole float32 elements (and whole pieces per rank)."""
    count = nbytes // ITEMSIZE
    if operation in PIECEWISE:
        count = count // world * world
    return count * ITEMSIZE


def buffers(operation: str, nbytes: int,
            fill: Callable[[int], torch.Tensor]) -> tuple[torch.Tensor | None, ...]:
    """The arguments of one call, for this rank: (tensor,) or (output, input)."""
    import torch.distributed as dist

    p, rank = dist.get_world_size(), dist.get_rank()
    count = effective_nbytes(operation, p, nbytes) // ITEMSIZE
    piece = count // p if operation in PIECEWISE else count
    if operation in ("broadcast", "reduce", "all_reduce"):
        return (fill(count),)
    if operation in ("scatter", "gather"):  # (piece, whole buffer on the root only)
        return fill(piece), fill(count) if rank == 0 else None
    if operation == "all_gather":
        return fill(count), fill(piece)
    if operation == "reduce_scatter":
        return fill(piece), fill(count)
    return fill(count), fill(count)  # all_to_all: output, input


def call(fn: Callable[..., None], operation: str, args: tuple[Any, ...],
         extra: Mapping[str, Any], tracer: Any = None) -> None:
    """One call of our collective ``fn`` on ``args``; ``extra``: its keyword arguments, the
    root's among them for a rooted operation (passed positionally after the buffers)."""
    kwargs = dict(extra)
    if operation in ROOTED:
        fn(*args, kwargs.pop(ROOTED[operation]), tracer=tracer, **kwargs)
    else:
        fn(*args, tracer=tracer, **kwargs)


def builtin_call(operation: str, args: tuple[Any, ...]) -> None:
    """PyTorch's own collective on the same buffers (root 0, SUM)."""
    import torch.distributed as dist

    p = dist.get_world_size()
    if operation == "broadcast":
        dist.broadcast(args[0], 0)
    elif operation == "reduce":
        dist.reduce(args[0], 0)
    elif operation == "all_reduce":
        dist.all_reduce(args[0])
    elif operation == "scatter":
        out, whole = args
        dist.scatter(out, list(whole.chunk(p)) if whole is not None else None, src=0)
    elif operation == "gather":
        piece, whole = args
        dist.gather(piece, list(whole.chunk(p)) if whole is not None else None, dst=0)
    elif operation == "all_gather":
        dist.all_gather_single(args[0], args[1])  # all_gather_into_tensor's new name
    elif operation == "reduce_scatter":
        dist.reduce_scatter_single(args[0], args[1])  # reduce_scatter_tensor's new name
    else:
        dist.all_to_all_single(args[0], args[1])


def _zeros(count: int) -> torch.Tensor:
    import torch

    from backends.device import device

    return torch.zeros(count, dtype=torch.float32, device=device())


def collective_step(fn: Callable[..., None], operation: str, extra: Mapping[str, Any],
                    nbytes: int, tracer: Any = None) -> Callable[[], None]:
    """Our collective ``fn`` on zeroed buffers of ``nbytes``, ready to run (``extra``: as
    :func:`call`)."""
    args = buffers(operation, nbytes, _zeros)
    return lambda: call(fn, operation, args, extra, tracer)


def builtin_step(operation: str, nbytes: int) -> Callable[[], None]:
    """PyTorch's built-in ``operation`` on zeroed buffers of ``nbytes``, ready to run."""
    args = buffers(operation, nbytes, _zeros)
    return lambda: builtin_call(operation, args)


def collective_check(fn: Callable[..., None], operation: str, algorithm: str,
                     extra: Mapping[str, Any], nbytes: int) -> None:
    """Run our collective and PyTorch's on the same random integer-valued buffers (at least 4
    elements per rank) and raise if this rank's results differ."""
    import torch
    import torch.distributed as dist

    from backends.device import device

    gen = torch.Generator().manual_seed(dist.get_rank())

    def fill(count: int) -> torch.Tensor:
        return torch.randint(-100, 100, (count,), generator=gen).float().to(device())

    ours = buffers(operation, max(nbytes, 4 * ITEMSIZE * dist.get_world_size()), fill)
    theirs = tuple(None if t is None else t.clone() for t in ours)
    call(fn, operation, ours, extra)
    builtin_call(operation, theirs)
    if operation == "reduce" and dist.get_rank() != 0:
        return  # only the root's result is defined (others may hold partial sums)
    for a, b in zip(ours, theirs, strict=True):
        if a is not None and not torch.equal(a, b):  # type: ignore[arg-type]
            raise AssertionError(f"rank {dist.get_rank()}: {operation}.{algorithm} "
                                 f"differs from PyTorch's {operation}")


# ---- point to point -----------------------------------------------------------------------

def ping_pong_step(nbytes: int, tracer: Any = None) -> Callable[[], None]:
    """:func:`~backends.collectives.point_to_point.ping_pong` of ``nbytes``, ready to run."""
    import torch

    from backends.collectives.point_to_point import ping_pong
    from backends.device import device

    buf = torch.zeros(nbytes, dtype=torch.uint8, device=device())
    return lambda: ping_pong(buf, tracer)


def ping_pong_check(nbytes: int) -> None:
    """Rank 0 gets back the very bytes it sent."""
    import torch
    import torch.distributed as dist

    from backends.collectives.point_to_point import ping_pong
    from backends.device import device

    rank, on = dist.get_rank(), device()
    sent = torch.arange(nbytes, dtype=torch.uint8, device=on)
    buf = sent.clone() if rank == 0 else torch.zeros(nbytes, dtype=torch.uint8, device=on)
    ping_pong(buf)
    if rank in (0, 1) and not torch.equal(buf, sent):
        raise AssertionError(f"rank {rank}: ping-pong returned different bytes")


def stream_step(nbytes: int, tracer: Any = None) -> Callable[[], None]:
    """:func:`~backends.collectives.point_to_point.stream` of ``nbytes``, ready to run."""
    import torch

    from backends.collectives.point_to_point import stream
    from backends.device import device

    buf = torch.zeros(nbytes, dtype=torch.uint8, device=device())
    return lambda: stream(buf, tracer)


def stream_check(nbytes: int) -> None:
    """Rank 1 receives the very bytes rank 0 sent."""
    import torch
    import torch.distributed as dist

    from backends.collectives.point_to_point import stream
    from backends.device import device

    rank, on = dist.get_rank(), device()
    sent = torch.arange(nbytes, dtype=torch.uint8, device=on)
    buf = sent.clone() if rank == 0 else torch.zeros(nbytes, dtype=torch.uint8, device=on)
    stream(buf)
    if rank == 1 and not torch.equal(buf, sent):
        raise AssertionError("rank 1: the stream delivered different bytes")


def one_to_all_step(nbytes: int, tracer: Any = None) -> Callable[[], None]:
    """:func:`~backends.collectives.point_to_point.one_to_all` of ``nbytes`` from rank 0,
    ready to run."""
    import torch

    from backends.collectives.point_to_point import one_to_all
    from backends.device import device

    buf = torch.zeros(nbytes, dtype=torch.uint8, device=device())
    return lambda: one_to_all(buf, 0, tracer)


def one_to_all_check(nbytes: int) -> None:
    """The naive one-to-all delivers what ``dist.broadcast`` does (float32, from rank 0)."""
    import torch
    import torch.distributed as dist

    from backends.collectives.point_to_point import one_to_all
    from backends.device import device

    elems = max(nbytes // 4, 1)
    ours = torch.randn(elems, generator=torch.Generator().manual_seed(dist.get_rank())).to(
        device())
    builtin = ours.clone()
    one_to_all(ours, root=0)
    dist.broadcast(builtin, src=0)
    if not torch.equal(ours, builtin):
        raise AssertionError(f"rank {dist.get_rank()}: one_to_all differs from dist.broadcast")
