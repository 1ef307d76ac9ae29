"""The fork server's last act: it removes the folder of its socket.

``multiprocessing``'s fork server (:func:`backends.launch.rank_context`) listens on a Unix socket
in a ``pymp-…`` folder of the launcher's temporary directory (``multiprocessing.util.
get_temp_dir``), which the launcher removes as it exits. A launcher killed with SIGKILL removes
nothing. Its fork server exits soon after — once the last rank has gone (:mod:`backends.lifeline`)
the server reads end-of-file on its "alive" pipe — and, having imported this module
(:data:`backends.launch.PRELOAD`), removes the folder on its way out.

Only the server itself removes anything: the launcher knows the server's pid, the server does
not, and the ranks it forks leave by ``os._exit``, which runs no exit handler.
"""

from __future__ import annotations

import atexit
import os
import shutil
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


atexit.register(remove_socket_folder)
