"""Where the lab writes results, checked before any measuring, and never over what it did not
write.

* ``compare --out DIR`` writes ``TWIN.csv``, ``TWIN.json`` and ``TWIN.png`` into ``DIR``; a file
  of those names already there is refused unless ``--force`` (:func:`check_new_files`).
* ``report --out DIR`` builds the report in a hidden sibling folder and moves it into place when
  complete. ``DIR`` may be new, empty, or a report the lab wrote before — recognised by its
  manifest :data:`MANIFEST`, the list of every file the lab put there. Such a report is
  replaced; a folder holding anything else (``--out .``, say) is refused
  (:func:`check_report_folder`), and :func:`replace_report` deletes only the listed files.

Every check raises :class:`lab.units.UsageError` in one line, before any work starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from lab.units import UsageError

MANIFEST = ".distml-report.json"
"""The file in a report folder listing what the lab wrote there."""


def check_folder_writable(folder: Path, flag: str) -> None:
    """``folder`` is a folder, or can be made one: not a file, and the nearest existing folder
    above it is writable."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"invalid {flag} {folder}: it is a file, not a folder")
    above = folder
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise UsageError(f"invalid {flag} {folder}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise UsageError(f"invalid {flag} {folder}: cannot write into {above}")


def check_new_files(folder: Path, names: Sequence[str], force: bool, flag: str = "--out"
                    ) -> None:
    """``folder`` can take ``names`` without overwriting anything, unless ``force``."""
    check_folder_writable(folder, flag)
    for name in names:
        path = folder / name
        if path.is_dir():
            raise UsageError(f"invalid {flag} {folder}: {path} is a folder")
        if path.exists() and not force:
            raise UsageError(f"{path} already exists: choose another {flag} folder, or add "
                             "--force to replace it")


def _manifest(folder: Path) -> list[str] | None:
    """The names a report folder's manifest lists (``None``: no readable manifest)."""
    try:
        names = json.loads((folder / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) and "/" not in n
                                              and n not in ("", ".", "..") for n in names):
        return None
    return names


def foreign_entries(folder: Path) -> list[str]:
    """What ``folder`` holds that its report manifest does not list (everything when there
    is no manifest)."""
    names = _manifest(folder)
    listed = set() if names is None else {*names, MANIFEST}
    return sorted(entry.name for entry in folder.iterdir() if entry.name not in listed
                  or not entry.is_file() or entry.is_symlink())


def check_report_folder(folder: Path) -> None:
    """``report --out``: a new folder, an empty one, or a report the lab wrote."""
    check_folder_writable(folder, "--out")
    if folder.is_dir():
        foreign = foreign_entries(folder)
        if foreign:
            raise UsageError(f"invalid --out {folder}: it holds {foreign[0]!r}, which no "
                             "report of the lab wrote; choose a new or empty folder")


def write_manifest(folder: Path) -> None:
    """List every file in ``folder`` in its manifest (the report is complete)."""
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != MANIFEST)
    (folder / MANIFEST).write_text(json.dumps({"files": names}, indent=1) + "\n")


def replace_report(built: Path, out: Path) -> Path:
    """Move the finished report ``built`` to ``out`` and return where it went.

    An old report at ``out`` loses only the files its manifest lists; should anything else
    have appeared in it meanwhile, the old folder stays and the new report goes beside it,
    into ``out`` with the time appended."""
    if out.is_dir():
        listed = _manifest(out) or []
        for name in [*listed, MANIFEST]:
            with contextlib.suppress(FileNotFoundError):
                (out / name).unlink()
        try:
            out.rmdir()
        except OSError:
            out = out.with_name(f"{out.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    built.rename(out)
    return out


def remove_partial(built: Path) -> None:
    """Delete a report folder this run created and did not finish."""
    shutil.rmtree(built, ignore_errors=True)
