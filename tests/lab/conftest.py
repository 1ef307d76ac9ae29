"""Fixtures shared by the CLI's tests."""

import pytest


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if any rank or task would start, or a calibration begin: a bad request
    must be refused before any of that."""

    def started(*args, **kwargs):
        raise AssertionError("work started before the input was checked")

    monkeypatch.setattr("backends.launch.run_ranks", started)
    monkeypatch.setattr("backends.horovod.runner.horovodrun", started)
    monkeypatch.setattr("lab.compare.ensure_calibrated", started)
