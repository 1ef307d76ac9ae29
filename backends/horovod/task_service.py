"""The task's side of ``horovodrun``'s start-up check: "rank r of p has come up".

Horovod's launcher (``horovod/runner/``) runs a **driver service** in the launching process and a
**task service** on every host; both are small TCP servers that exchange signed request objects
(book ch. 7, "Network basics and the Driver/Task services"). On one machine there is no network to
probe, so the lab keeps the one part of that exchange that still matters: every task process
**registers** with the driver once it has initialised, and the driver, which knows how many tasks
it started, can tell within its start timeout which ranks never came up (instead of leaving the
others waiting in their first collective for ever).

The wire format is one line of JSON each way, signed like Horovod's service messages with an HMAC
(SHA-256) of the job's secret key when ``HOROVOD_SECRET_KEY`` is set::

    task → driver   {"rank": 1, "size": 4, "pid": 4711, "host": "node0", "mac": "…"}\\n
    driver → task   {"ok": true}\\n        or   {"ok": false, "error": "…"}\\n

:func:`notify_driver` is what ``backends.horovod.init()`` calls when ``HOROVOD_DRIVER_ADDR`` is
set; :class:`backends.horovod.runner.DriverService` is the other end.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

DRIVER_ADDR_ENV = "HOROVOD_DRIVER_ADDR"
DRIVER_PORT_ENV = "HOROVOD_DRIVER_PORT"
SECRET_KEY_ENV = "HOROVOD_SECRET_KEY"
NOTIFY_TIMEOUT_S = 10.0
"""How long a task keeps trying to reach the driver before it gives up, s."""

_MAX_LINE = 64 * 1024


class DriverUnreachable(RuntimeError):
    """The task could not reach ``horovodrun``'s driver service, or the driver refused it."""


def sign(payload: Mapping[str, Any], key: str | None) -> str:
    """HMAC-SHA256 of the payload's canonical JSON (sorted keys, no ``mac``) under ``key``, hex;
    ``""`` when there is no key."""
    if not key:
        return ""
    body = json.dumps({k: v for k, v in payload.items() if k != "mac"}, sort_keys=True)
    return hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()


def verify(payload: Mapping[str, Any], key: str | None) -> bool:
    """True when ``payload["mac"]`` is the signature of the payload under ``key`` (always true
    without a key)."""
    if not key:
        return True
    return hmac.compare_digest(str(payload.get("mac", "")), sign(payload, key))


def read_line(conn: socket.socket) -> bytes:
    """Read bytes up to and including ``\\n`` (at most 64 KiB); raise ``ConnectionError`` if the
    peer closes first."""
    buf = bytearray()
    while not buf.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionError("connection closed before the end of the message")
        buf += chunk
        if len(buf) > _MAX_LINE:
            raise ConnectionError("message too long")
    return bytes(buf)


def driver_address(environ: Mapping[str, str] | None = None) -> tuple[str, int] | None:
    """``(host, port)`` of the driver from ``HOROVOD_DRIVER_ADDR``/``_PORT``, or ``None`` when the
    process was not started by ``horovodrun``. Raises ``ValueError`` for a malformed port."""
    env = os.environ if environ is None else environ
    addr = env.get(DRIVER_ADDR_ENV)
    if not addr:
        return None
    port_text = env.get(DRIVER_PORT_ENV, "")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"{DRIVER_PORT_ENV}={port_text!r} is not a port number "
                         f"(it must be set with {DRIVER_ADDR_ENV})") from None
    if not 0 < port < 65536:
        raise ValueError(f"{DRIVER_PORT_ENV}={port} is not a port number")
    return addr, port


def notify_driver(rank: int, size: int, timeout_s: float = NOTIFY_TIMEOUT_S) -> None:
    """Tell ``horovodrun``'s driver that task ``rank`` of ``size`` has come up.

    Reads the driver's address from ``HOROVOD_DRIVER_ADDR`` and ``HOROVOD_DRIVER_PORT`` and signs
    the message with ``HOROVOD_SECRET_KEY`` when set. Retries a refused connection until
    ``timeout_s`` has passed (the driver listens before any task starts, so this is short).

    Raises:
        ValueError: the environment does not name a driver (not started by ``horovodrun``).
        DriverUnreachable: no answer within ``timeout_s``, or the driver refused this rank (a rank
            or size that does not match the job, a bad signature).
    """
    where = driver_address()
    if where is None:
        raise ValueError(f"{DRIVER_ADDR_ENV} is not set: this process was not started by "
                         "horovodrun")
    host, port = where
    key = os.environ.get(SECRET_KEY_ENV)
    payload: dict[str, Any] = {"rank": int(rank), "size": int(size), "pid": os.getpid(),
                               "host": socket.gethostname()}
    payload["mac"] = sign(payload, key)
    message = (json.dumps(payload) + "\n").encode()
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            with socket.create_connection((host, port), timeout=min(left, 2.0)) as conn:
                conn.settimeout(max(deadline - time.monotonic(), 0.1))
                conn.sendall(message)
                reply = json.loads(read_line(conn))
        except (OSError, ConnectionError, json.JSONDecodeError) as exc:
            last_error = exc
            time.sleep(min(0.1, max(deadline - time.monotonic(), 0.0)))
            continue
        if not reply.get("ok"):
            raise DriverUnreachable(f"horovodrun's driver at {host}:{port} refused task "
                                    f"{rank}: {reply.get('error', 'no reason given')}")
        return
    raise DriverUnreachable(f"task {rank} could not reach horovodrun's driver at {host}:{port} "
                            f"within {timeout_s:g} s ({last_error}); is horovodrun still "
                            "running?")
