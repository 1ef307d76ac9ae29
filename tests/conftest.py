"""Shared test settings: a hypothesis profile that keeps the suite fast on 2 cores, and the
textbook's figures drawn once for every test that reads them."""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
# Grading the stubs as handed out: every example fails at once, so a few examples say so and
# shrinking a "not implemented" failure would only repeat it (test_stubs_earn_zero).
settings.register_profile("stubs", max_examples=3, deadline=None,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate],
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def drawn_figures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every figure of ``python -m lab.figures``, drawn once per test run (about a minute)."""
    from lab.figures import draw

    out = tmp_path_factory.mktemp("figures")
    draw(out)
    return out
