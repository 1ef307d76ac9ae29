"""The fork server's last act: it removes the folder of its socket.

``multiprocessing``'s fork server (:func:`backends.launch.rank_context`) listens on a Unix socket
in a ``pymp-…`` folder of the launcher's temporary directory (``multiprocessing.util.
get_temp_dir``), which the launcher removes as it exits. A launcher killed with SIGKILL removes
nothing. Its fork server exits soon after — once the last rank has gone (:mod:`backends.lifeline`)
the server reads end-of-file on its "alive" pipe — and, having imported this module
(:data:`backends.launch.PRELOAD`), removes the folder on its way out.

Only the server itself removes anything: the launcher knows the server's pid, the server does
not, and the ranks it forks leave by ``os._exit``, which runs no exit handler.

The server also leaves its launcher's process group as it imports this module. Whoever ends a
launcher by killing its whole group — Jupyter does so to a notebook's kernel at shutdown —
would otherwise kill the server with it, before it could read end-of-file and tidy up: one
``pymp-…`` folder left behind per kernel. Out of the group, the server outlives the launcher
by the moment it takes to see the pipe close, then exits as above. Its ranks still never
outlive the launcher (:mod:`backends.lifeline`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
from multiprocessing import forkserver
from typing import Any


def remove_socket_folder() -> None:
    """In the fork server: delete the ``pymp-…`` folder of its socket (elsewhere: nothing)."""
    server: Any = forkserver._forkserver  # its private fields: the stdlib has no public ones
    address = server._forkserver_address
    if server._forkserver_pid is not None or not isinstance(address, str):
        return  # the launcher (its multiprocessing removes the folder) or no server at all
    folder = os.path.dirname(address)
    if os.path.basename(folder).startswith("pymp-"):
        shutil.rmtree(folder, ignore_errors=True)


def _in_fork_server() -> bool:
    """Whether this import runs in the fork server, preloading (``forkserver.main`` on the
    stack): the launcher may import this module too, and must stay in its group."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


atexit.register(remove_socket_folder)
if _in_fork_server():
    with contextlib.suppress(OSError):  # a platform or sandbox that forbids it: stay
        os.setpgid(0, 0)
