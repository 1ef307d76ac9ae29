"""The FSDP units' one-process profile (:mod:`backends.fsdp.profile`) runs through our wrapper.

In a team of one process, :func:`~backends.fsdp.profile.unit_costs` times each unit inside
:class:`backends.fsdp.FSDP`: the gathers the wrapper's hooks issue fall in the spans of the
units whose hooks issued them — literally the prefetch order of the wrapper's log
(``tests/backends/test_fsdp.py``'s ``LOGS``), for every resharding and prefetching choice and
in mixed precision — and every unit reports its own size and positive local work.
"""

import pytest
import torch

from backends.fsdp.profile import unit_costs
from backends.launch import spawn
from lab.models import mlp

pytestmark = pytest.mark.timeout(180)

WIDTHS = (8, 16, 16, 4)
CONFIGS = [(True, True, False), (True, False, False), (False, True, False),
           (False, False, False), (True, True, True)]
"""(reshard_after_forward, prefetch, mixed)."""


def profile_all() -> list[list[dict]]:
    """Rank program (a team of one): :func:`unit_costs` in every configuration."""
    torch.manual_seed(0)
    return [unit_costs(mlp(WIDTHS), WIDTHS[0], 3, *config, repeats=2) for config in CONFIGS]


@pytest.fixture(scope="module")
def profiles():
    return dict(zip(CONFIGS, spawn(profile_all, 1, timeout=60, deadline=150)[0], strict=True))


SPANS = {
    # (reshard_after_forward, prefetch): per unit, the units gathered in its forward, backward
    (True, True): [([0, 1], []), ([2], [0]), ([], [2, 1])],
    (True, False): [([0], [0]), ([1], [1]), ([2], [2])],
    (False, True): [([0, 1], []), ([2], []), ([], [])],
    (False, False): [([0], []), ([1], []), ([2], [])],
}


@pytest.mark.parametrize("config", CONFIGS)
def test_the_wrappers_gathers_fall_in_the_spans_that_issue_them(profiles, config):
    got = [(c["forward_gathers"], c["backward_gathers"]) for c in profiles[config]]
    assert got == SPANS[config[:2]]


@pytest.mark.parametrize("config", CONFIGS)
def test_every_unit_reports_its_size_and_its_local_work(profiles, config):
    numels = [WIDTHS[i] * WIDTHS[i + 1] + WIDTHS[i + 1] for i in range(len(WIDTHS) - 1)]
    assert [c["numel"] for c in profiles[config]] == numels
    for c in profiles[config]:
        assert c["forward_s"] > 0 and c["backward_s"] > 0
        assert c["gather_copy_s"] > 0 and c["reduce_local_s"] > 0
