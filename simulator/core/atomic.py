"""Writing files so that nothing is ever half-written or lost.

Two tools that the calibration file and the lab's results share:

* :func:`write_atomic` — the new text goes to a temporary file in the same folder, is flushed to
  disk (``fsync``) and renamed over the old file, and the folder is flushed too. A crash at any
  moment leaves the old file or the new one, never a mixture.
* :func:`folder_lock` — an exclusive advisory lock (``flock``) on a folder, held around a
  read-modify-write so that two processes updating one file at once both keep their changes.
  The lock is on the folder itself: no lock file is left behind, and the kernel releases it
  when the holder dies.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


@contextmanager
def folder_lock(folder: str | Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` for the ``with`` block (blocks until free)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Replace ``path`` by ``data`` (text is written as UTF-8) all at once: temporary file in
    the same folder, ``fsync``, rename, ``fsync`` of the folder (so the rename survives a power
    cut). On any failure the temporary file is removed and ``path`` is untouched. The file
    gets the permissions of the one it replaces, or a new file's (``0o666`` less the umask)
    rather than ``mkstemp``'s owner-only ones."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _umask() -> int:
    """The process's umask (read by setting it, then putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
