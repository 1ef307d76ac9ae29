"""What the grading tests of the exercises share.

For every exercise: :func:`call_or_fail`, the function under test (yours or the reference, as
``DISTML_IMPL`` says) that fails the test with one clear line while it is still a stub.

For the exercises graded on real processes (2.1 and 2.2): each world size is launched once per
test module (:class:`Launches`, a module-scoped cache); its ranks run every case of
:data:`CASES` and report, and the tests read the reports. Inside the ranks the code under test
may send only point-to-point messages; they are counted, and the counts are compared with the
messages the simulated twin sends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from exercises import load
from simulator.core import Cluster, Device, Link, Topology, run_spmd


def call_or_fail(chapter_module: str, function: str, todo: str, *args: Any) -> Any:
    """``function(*args)`` of ``chapter_module`` (``DISTML_IMPL`` picks yours or the reference);
    a stub fails the test here with the one line ``todo``."""
    try:
        return getattr(load(chapter_module), function)(*args)
    except NotImplementedError:
        pass  # fail outside the handler: one clear line instead of a chained traceback
    pytest.fail(todo, pytrace=False)


# ---- exercises on real processes (2.1, 2.2) ---------------------------------------------------

CASES = (  # (dtype, element count, reduction): counts that 2, 4 (and 3, 5) do not divide
    ("float32", 1, "SUM"),
    ("float32", 7, "SUM"),
    ("int64", 13, "MAX"),
    ("float64", 1001, "MIN"),
    ("float32", 65_539, "SUM"),
)
PG_TIMEOUT_S = 20  # a deadlock fails the launch after this long instead of hanging
DEADLINE_S = 120
DEADLOCK_HINT = (" (ranks waited for each other until the timeout: a deadlock? Post the receive, "
                 "dist.irecv, before the send, dist.isend, then wait() for both)")


# ---- inside the ranks -------------------------------------------------------------------------

COLLECTIVES = ("all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor",
               "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
               "scatter", "gather")


class CollectiveCalled(RuntimeError):
    """The code under test called one of torch.distributed's built-in collectives."""


@contextmanager
def point_to_point_only(exercise: str) -> Iterator[list[int]]:
    """Inside the block every built-in collective raises and every message sent is counted.

    Yields the list that collects the bytes of each message this rank sends. Both
    ``torch.distributed`` and ``torch.distributed.distributed_c10d`` are patched (``dist.send``
    sends through the latter's ``isend``), and the module under test is first imported inside
    the block, so ``from torch.distributed import isend`` binds the counting version too.
    """
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    sent: list[int] = []
    real_isend = c10d.isend

    def counting_isend(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(tensor.numel() * tensor.element_size())
        return real_isend(tensor, *args, **kwargs)

    def refuse(name: str) -> Callable[..., None]:
        def collective(*args: Any, **kwargs: Any) -> None:
            raise CollectiveCalled(f"{exercise} asks for point-to-point messages only, but "
                                   f"your code called dist.{name}")
        return collective

    patches = {"isend": counting_isend, **{name: refuse(name) for name in COLLECTIVES}}
    saved = [(module, name, getattr(module, name)) for module in (dist, c10d) for name in patches]
    for module, name, _ in saved:
        setattr(module, name, patches[name])
    try:
        yield sent
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def rank_inputs(cases: tuple[tuple[str, int, str], ...]) -> list[tuple[str, Any, Any]]:
    """This rank's (label, tensor, op) for each case: integer values, so every sum is exact."""
    import torch
    import torch.distributed as dist

    inputs = []
    for i, (dtype, count, op) in enumerate(cases):
        gen = torch.Generator().manual_seed(7919 * i + dist.get_rank())
        tensor = torch.randint(-50, 50, (count,), generator=gen).to(getattr(torch, dtype))
        inputs.append((f"{dtype} × {count}, {op}", tensor, getattr(dist.ReduceOp, op)))
    return inputs


def mismatch(got: Any, expected: Any, returned: Any = None) -> str | None:
    """``None`` if equal, else one line saying where they differ."""
    import torch

    if torch.equal(got, expected):
        return None
    wrong = (got != expected).nonzero().flatten()
    i = int(wrong[0])
    hint = (" (it returned a tensor: write the result into the tensor given, in place)"
            if isinstance(returned, torch.Tensor) else "")
    return (f"{wrong.numel()} of {got.numel()} elements differ from PyTorch's (first: element "
            f"{i}, got {got[i].item()}, expected {expected[i].item()}){hint}")


def run_cases(exercise: str, chapter_module: str, function: str,
              cases: tuple[tuple[str, int, str], ...],
              grade: Callable[[str, Any, Any, Any], tuple[str, str | None]]) -> Any:
    """Rank function body: ``function`` of ``chapter_module`` on every case, beside
    ``dist.all_reduce`` of the same input, sending point-to-point messages only.

    ``grade(label, tensor, all_reduced, returned)`` gives the case's report line and what
    differs (``None`` if nothing). Returns the reports, or ``{"todo": …}`` for a stub.
    """
    import torch.distributed as dist

    inputs = rank_inputs(cases)
    expected = []
    for _, tensor, op in inputs:
        reference = tensor.clone()
        dist.all_reduce(reference, op=op)
        expected.append(reference)
    reports = []
    with point_to_point_only(exercise) as sent:
        try:
            under_test = getattr(load(chapter_module), function)
            for (label, tensor, op), reference in zip(inputs, expected, strict=True):
                sent.clear()
                returned = under_test(tensor, op)
                case, error = grade(label, tensor, reference, returned)
                reports.append({"case": case, "error": error, "sent": list(sent)})
        except NotImplementedError as exc:
            return {"todo": str(exc)}
    return reports


# ---- in the test process ----------------------------------------------------------------------

def launch(rank_fn: Callable[..., Any], world: int, *args: Any) -> list[Any] | str:
    """Every rank's report, or the launch's failure as text (a failing rank, a deadlock)."""
    from backends.launch import RankError, spawn

    try:
        return spawn(rank_fn, world, *args, backend="gloo", timeout=PG_TIMEOUT_S,
                     deadline=DEADLINE_S)
    except RankError as exc:
        return str(exc)


def is_todo(outcome: list[Any] | str) -> bool:
    """Whether the ranks found the function under test not implemented."""
    return isinstance(outcome, list) and any(isinstance(r, dict) and "todo" in r
                                             for r in outcome)


def graded(outcome: list[Any] | str, world: int, todo: str) -> list[list[dict[str, Any]]]:
    """The per-rank reports; fails the test (one clear line) when there are none."""
    if is_todo(outcome):
        pytest.fail(todo, pytrace=False)
    if isinstance(outcome, str):
        hint = DEADLOCK_HINT if "Timed out" in outcome or "timed out" in outcome else ""
        pytest.fail(f"on {world} ranks the launch failed{hint}: {outcome}", pytrace=False)
    return outcome


def wrong_results(reports: list[list[dict[str, Any]]], key: str = "error") -> list[str]:
    """``rank R, case: what differs`` for each failed case."""
    return [f"rank {rank}, {case['case']}: {case[key]}"
            for rank, cases in enumerate(reports) for case in cases if case[key]]


def simulated_sends(program: Callable[..., Any], world: int, nbytes: int,
                    itemsize: int) -> list[list[int]]:
    """Bytes of each message each rank sends in the simulated twin, sorted."""
    link = Link(1e-6, 1e9, "none")
    cpu = Device("grading", flops_per_s=1e10, mem_bandwidth_Bps=1e10, memory_bytes=math.inf)
    cluster = Cluster.homogeneous("grading", cpu, Topology.fully_connected(world, link))
    trace = run_spmd(cluster, program, nbytes, itemsize=itemsize).trace
    return [sorted(s.nbytes for s in trace.for_rank(r) if s.kind == "send")
            for r in range(world)]


def traffic_differences(reports: list[list[dict[str, Any]]], program: Callable[..., Any],
                        cases: tuple[tuple[str, int, str], ...]) -> list[str]:
    """Where the messages counted on the real ranks differ from the simulated twin's."""
    import torch

    world, differences = len(reports), []
    for i, (dtype, count, _) in enumerate(cases):
        itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
        expected = simulated_sends(program, world, count * itemsize, itemsize)
        for rank in range(world):
            sent = sorted(reports[rank][i]["sent"])
            if sent != expected[rank]:
                differences.append(f"rank {rank}, {reports[rank][i]['case']}: sent messages of "
                                   f"{sent} bytes, the simulated twin {expected[rank]}")
    return differences


class Launches:
    """``launches(world)``: the outcome of one launch per world size, kept for the module.

    Once the function under test has been found not implemented on a power-of-two world, no
    further launch is made: every test fails on that outcome, so grading a stub stays quick.
    """

    def __init__(self, rank_fn: Callable[..., Any], cases: tuple[tuple[str, int, str], ...]):
        self.rank_fn, self.cases = rank_fn, cases
        self.outcomes: dict[int, list[Any] | str] = {}

    def __call__(self, world: int) -> list[Any] | str:
        if world not in self.outcomes:
            todo = [outcome for w, outcome in self.outcomes.items()
                    if w & (w - 1) == 0 and is_todo(outcome)]
            self.outcomes[world] = todo[0] if todo else launch(self.rank_fn, world, self.cases)
        return self.outcomes[world]

