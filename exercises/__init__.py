"""Classroom exercises: stubs to fill in, one module per chapter (``chNN_topic.py``).

Each exercise is a function whose body is ``raise NotImplementedError`` under a banner::

    # ===== EXERCISE 1.1: ... =====

that says what to write, gives hints, and names what the grading tests check. Reference
answers live under the same module names in :mod:`solutions`. Grade your own answers with::

    make grade CH=01          # every task of chapter 1: points earned / possible per task
    make grade EX=1.2         # one task (its tests carry the marker ex01_2)

The tests never import a chapter module directly: they call :func:`load`, which picks the
stubs or the reference answers from the environment variable ``DISTML_IMPL``, so one test
file grades both (CI runs it with ``DISTML_IMPL=solutions``).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

IMPLEMENTATIONS = ("exercises", "solutions")

# A teacher grades a student's copy of this folder by pointing DISTML_EXERCISES_DIR at it
# (``distml-lab grade``): the chapter modules are then imported from there, in this process
# and in every rank it spawns, while this file (and ``load``) stay the lab's own.
if os.environ.get("DISTML_EXERCISES_DIR"):
    __path__ = [os.path.abspath(os.environ["DISTML_EXERCISES_DIR"])]


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
