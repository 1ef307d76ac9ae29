"""Shared test settings: a hypothesis profile that keeps the suite fast on 2 cores, and the
textbook's figures drawn once for every test that reads them."""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None,
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
