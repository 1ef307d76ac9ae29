"""The shared harness of the chapter-2 collective tests: hypothesis draws, one launch of 8 ranks.

Launching ranks costs seconds (every child imports torch), far too much to spend per case or
even per world size. So the parent draws every collective module's cases with hypothesis and
ONE launch of ``WORLD = 8`` ranks runs them all. World sizes 1–7 run on *teams*: a random
sorted subset of the 8 ranks (drawn per run), handed to our algorithm as a plain list of ranks
or as a ``dist.new_group`` (drawn per case) and to PyTorch's built-in as that group; world 8
uses the default group. Ranks outside a case's team skip it.

Each ``test_collectives_<module>.py`` defines ``cases(world)`` (a hypothesis strategy of case
lists) and a rank-side ``check(case, team)`` that runs one case on our algorithm and on PyTorch's
built-in and raises ``AssertionError`` when they differ; its test calls
:func:`assert_module_passes`. A failing case is reported with everything needed to replay it:
algorithm, world size, count, dtype, op, root, parameter and seed.
"""

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.distributed as dist
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from backends.collectives.all_gather import ring_all_gather
from backends.collectives.all_reduce import ring_all_reduce
from backends.launch import spawn

WORLD = 8
"""Ranks launched; world sizes 1 … WORLD are tested."""

MODULES = ("broadcast", "scatter_gather", "reduce", "all_gather", "reduce_scatter",
           "all_reduce", "all_to_all", "harness")
"""Modules whose cases the launch runs (those whose test module pytest collected)."""

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}
OPS = {"SUM": dist.ReduceOp.SUM, "MAX": dist.ReduceOp.MAX, "MIN": dist.ReduceOp.MIN,
       "AVG": dist.ReduceOp.AVG}
BIG = 2**16
"""Every algorithm gets one case with a count of at least this many elements."""


@dataclass(frozen=True)
class Case:
    """One run of one algorithm; ``count`` means what the module's API calls a count."""

    module: str
    algorithm: str
    world: int
    count: int
    dtype: str
    op: str = ""
    root: int = 0  # team rank of the root
    param: int = 0  # algorithm parameter: segment bytes, ranks per node
    seed: int = 0
    as_list: bool = False  # pass the team to our algorithm as a list of ranks

    def __str__(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in (("op", self.op), ("root", self.root),
                                                 ("param", self.param)) if v != "" and v != 0)
        return (f"{self.algorithm}(world={self.world}, count={self.count}, dtype={self.dtype}"
                f"{extra}, seed={self.seed}, group={'list' if self.as_list else 'default/pg'})")


@dataclass(frozen=True)
class Team:
    """Rank-side view of a case's team."""

    ranks: list[int]  # global ranks, sorted
    group: Any  # what our algorithm gets: None, a list of ranks or a ProcessGroup
    pg: Any  # what PyTorch's built-in gets: None or the ProcessGroup
    rank: int  # my rank in the team
    root: int  # the case's root, as a global rank

    @property
    def size(self) -> int:
        return len(self.ranks)


# ---- drawing cases (parent) -------------------------------------------------------------------

def case_lists(module: str, world: int, counts: Sequence[st.SearchStrategy[int]]
               ) -> st.SearchStrategy[list[Case]]:
    """One case per algorithm of ``module`` and per count strategy, at one world size.

    The test module says what to draw: ``ALGORITHMS`` (name → function), and ``DRAW`` with
    ``ops`` (names of :data:`OPS`; AVG only for floats), ``rooted`` and ``params`` (algorithm
    name → strategy of its parameter).
    """
    spec = _test_module(module).DRAW
    ops, params = spec.get("ops", ()), spec.get("params", {})

    @st.composite
    def one(draw: Any, algorithm: str, count: st.SearchStrategy[int]) -> Case:
        dtype = draw(st.sampled_from(sorted(DTYPES)))
        usable = [op for op in ops if dtype != "int64" or op != "AVG"]
        return Case(module, algorithm, world, draw(count), dtype,
                    op=draw(st.sampled_from(usable)) if usable else "",
                    root=draw(st.integers(0, world - 1)) if spec.get("rooted") else 0,
                    param=draw(params.get(algorithm, st.just(0))),
                    seed=draw(st.integers(0, 2**31 - 1)),
                    as_list=world < WORLD and draw(st.booleans()))

    algorithms = _test_module(module).ALGORITHMS
    return st.tuples(*(one(a, c) for a in algorithms for c in counts)).map(list)


def module_cases(module: str) -> list[Case]:
    """Every algorithm at every world size 1 … WORLD with counts 0, 1, p−1 and two random ones,
    plus two cases of :data:`BIG` or more elements per algorithm at random world sizes."""
    cases = []
    for world in range(1, WORLD + 1):
        counts = [st.just(0), st.just(1), st.just(world - 1), *[st.integers(2, 3000)] * 2]
        cases += draw(case_lists(module, world, counts))
    big = [st.integers(BIG, BIG + 999)]
    for _ in range(2):
        cases += draw(st.integers(1, WORLD).flatmap(lambda w: case_lists(module, w, big)))
    return cases


def draw(strategy: st.SearchStrategy[Any]) -> Any:
    """One random example of ``strategy``, drawn by hypothesis here in the parent.

    Hypothesis tries its simplest example first (all zeros: seed 0, count 2, …), so this lets
    it generate three and keeps the last, a random one.
    """
    found = []

    @settings(max_examples=3, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def keep(value: Any) -> None:
        found.append(value)

    keep()
    return found[-1]


def _test_module(module: str) -> Any:
    return importlib.import_module(f"tests.backends.test_collectives_{module}")


# ---- running cases (ranks) --------------------------------------------------------------------

def make_input(case: Case, numel: int, rank: int | None = None) -> torch.Tensor:
    """This rank's deterministic input for ``case``: values ~10·N(0,1), or integers ±1000."""
    rank = dist.get_rank() if rank is None else rank
    gen = torch.Generator().manual_seed(case.seed * 64 + rank)
    if case.dtype == "int64":
        return torch.randint(-1000, 1000, (numel,), generator=gen)
    return (torch.randn(numel, generator=gen, dtype=torch.float64) * 10).to(DTYPES[case.dtype])


def assert_same(ours: torch.Tensor, ref: torch.Tensor, case: Case, what: str = "") -> None:
    """Exact for integers and for MAX/MIN/moves; close for floating-point sums."""
    assert ours.shape == ref.shape, f"{what} shape {tuple(ours.shape)} != {tuple(ref.shape)}"
    if ours.is_floating_point() and case.op in ("SUM", "AVG"):
        tol = 1e-4 if ours.dtype == torch.float32 else 1e-10
        wrong = ~torch.isclose(ours, ref, rtol=tol, atol=tol * 10)
    else:
        wrong = ours != ref
    if wrong.any():
        bad = wrong.nonzero().flatten()[:3].tolist()
        raise AssertionError(f"{what} differs from PyTorch's at elements {bad}: "
                             f"{ours[bad].tolist()} != {ref[bad].tolist()}")


def builtin_op(case: Case) -> Any:
    """The op for PyTorch's built-in: AVG is checked as SUM followed by ``/ p``."""
    return OPS["SUM" if case.op == "AVG" else case.op]


def builtin_finish(ref: torch.Tensor, case: Case, team: "Team") -> torch.Tensor:
    """The built-in's SUM turned into the AVG that ``case`` asked for."""
    return ref / team.size if case.op == "AVG" else ref


def run_cases(cases: list[Case], teams: dict[int, list[int]]) -> list[tuple[str, str]]:
    """Rank function: run every case this rank is a member of; return (module, failure)."""
    rank = dist.get_rank()
    pgs = {world: dist.new_group(ranks) for world, ranks in sorted(teams.items())
           if world < WORLD}  # every rank creates every group, in the same order
    failures = []
    for case in cases:
        ranks = teams[case.world]
        if rank not in ranks:
            continue
        pg = pgs.get(case.world)
        team = Team(ranks, ranks if case.as_list else pg, pg, ranks.index(rank),
                    ranks[case.root])
        try:
            _test_module(case.module).check(case, team)
        except Exception as exc:
            failures.append((case.module, f"{case} on rank {rank}: {type(exc).__name__}: {exc}"))
    return failures


# ---- one launch for everything (parent) ------------------------------------------------------

_RESULTS: dict[str, tuple[list[Case], list[str]]] = {}


def _run_collected_modules() -> None:
    """Draw the cases of every collected collective test module and run them in one launch."""
    modules = [m for m in MODULES if f"tests.backends.test_collectives_{m}" in sys.modules]
    teams = draw(st.fixed_dictionaries({
        world: st.permutations(range(WORLD)).map(lambda p, w=world: sorted(p[:w]))
        for world in range(1, WORLD + 1)}))
    cases = {m: HARNESS_CASES if m == "harness" else module_cases(m) for m in modules}
    every = [c for m in modules for c in cases[m]]
    per_rank = spawn(run_cases, WORLD, every, teams, timeout=30, deadline=240)
    for m in modules:
        _RESULTS[m] = (cases[m], [f for failures in per_rank for mod, f in failures if mod == m])


def results(module: str) -> tuple[list[Case], list[str]]:
    """The cases drawn for ``module`` and their failures (running everything on first use)."""
    if module not in _RESULTS:
        _run_collected_modules()
    return _RESULTS[module]


def assert_module_passes(module: str) -> None:
    """Every algorithm of ``module`` ran at every world size and agreed with PyTorch."""
    cases, failures = results(module)
    algorithms = _test_module(module).ALGORITHMS
    covered = {(c.algorithm, c.world) for c in cases}
    assert covered == {(a, w) for a in algorithms for w in range(1, WORLD + 1)}
    assert {c.algorithm for c in cases if c.count >= BIG} == set(algorithms)
    if failures:
        pytest.fail(f"{len(failures)} failing case(s) of {module}, first ones:\n"
                    + "\n".join(failures[:8]), pytrace=False)


# ---- the harness's own cases: a failure must name its case; bad input is refused ------------

def broken_all_reduce(tensor: torch.Tensor, op: Any, group: list[int]) -> None:
    """Ring all-reduce with a bug: the first team member gets its first element off by one."""
    ring_all_reduce(tensor, op, group=group)
    if tensor.numel() and dist.get_rank() == group[0]:
        tensor[0] += 1


HARNESS_CASES = [
    Case("harness", "broken_all_reduce", 3, 5, "float64", op="SUM", seed=7, as_list=True),
    Case("harness", "refuses_bad_input", 3, 4, "int64"),
]


def check(case: Case, team: Team) -> None:
    x = make_input(case, case.count)
    if case.algorithm == "refuses_bad_input":
        with pytest.raises(ValueError, match="AVG needs a floating-point tensor"):
            ring_all_reduce(x, dist.ReduceOp.AVG, group=team.group)
        with pytest.raises(ValueError, match="output must hold 3·4 elements"):
            ring_all_gather(torch.empty(5, dtype=x.dtype), x, group=team.group)
        return
    ours, ref = x.clone(), x.clone()
    broken_all_reduce(ours, builtin_op(case), group=team.group)
    dist.all_reduce(ref, builtin_op(case), group=team.pg)
    assert_same(ours, ref, case, "the result")


def test_a_failing_case_names_algorithm_world_count_dtype_and_op():
    _, failures = results("harness")
    assert len(failures) == 1, failures  # the bad input was refused on every rank
    assert failures[0].startswith(
        "broken_all_reduce(world=3, count=5, dtype=float64, op=SUM, seed=7, group=list) on rank ")
    assert "differs from PyTorch's at elements [0]" in failures[0]
