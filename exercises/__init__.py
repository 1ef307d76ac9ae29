"""Classroom exercises: stubs to fill in, one module per chapter (``chNN_topic.py``).

Each exercise is a function whose body is ``raise NotImplementedError`` under a banner::

    # ===== EXERCISE 1.1: ... =====

that says what to write, gives hints, and names what the grading tests check. Reference
answers live under the same module names in :mod:`solutions`. Grade your own answers with::

    make grade CH=01          # DISTML_IMPL=exercises pytest -m ch01 tests/exercises

The tests never import a chapter module directly: they call :func:`load`, which picks the
stubs or the reference answers from the environment variable ``DISTML_IMPL``, so one test
file grades both (CI runs it with ``DISTML_IMPL=solutions``).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

IMPLEMENTATIONS = ("exercises", "solutions")


def load(chapter_module: str) -> ModuleType:
    """``solutions.<chapter_module>`` if ``DISTML_IMPL=solutions``, else ``exercises.<…>``.

    Args:
        chapter_module: a module name such as ``"ch01_alpha_beta"``.

    Raises:
        ValueError: ``DISTML_IMPL`` names neither ``exercises`` nor ``solutions``.
    """
    impl = os.environ.get("DISTML_IMPL") or "exercises"
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"DISTML_IMPL={impl!r}: expected 'exercises' (your answers, the "
                         "default) or 'solutions' (the reference answers)")
    return importlib.import_module(f"{impl}.{chapter_module}")
