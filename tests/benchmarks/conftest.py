"""The benchmark scripts import their helper as ``_output`` (they run as ``python
benchmarks/x.py``, their folder first on ``sys.path``); the tests import them the same way."""

import importlib
from types import ModuleType

import pytest

from tests.benchmarks import BENCHMARKS


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch):
    """``load("name")``: the module ``benchmarks/name.py``, imported as its script imports it."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))

    def _load(name: str) -> ModuleType:
        return importlib.import_module(name)

    return _load
