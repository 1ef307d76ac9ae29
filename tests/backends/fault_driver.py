"""A launcher the fault tests can signal: ``python -m tests.backends.fault_driver LAUNCHER FAULT
MARKS`` runs two ranks (the parameter server: a scheduler, a server and two workers) that commit
``FAULT`` (:mod:`tests.backends.fault_fns`) under ``LAUNCHER``:

* ``spawn`` — :func:`backends.launch.spawn` on loopback;
* ``shaped`` — the same with ``network="shaped"`` (:mod:`backends.shaped`);
* ``ps`` — :func:`backends.parameter_server.train.train` with a faulty SSP wait.

(``horovodrun`` needs no driver: the tests start ``python -m lab.cli horovodrun``.)

It prints a :class:`~backends.launch.RankError` to stderr as a user's script would, under a
``FAILED:`` line, and exits 1; Ctrl-C (and SIGTERM, which the launchers turn into
``KeyboardInterrupt("SIGTERM")``) exits ``128 + signal``, as a shell reports it.
"""

from __future__ import annotations

import signal
import sys

TIMEOUT_S = 3.0
"""Process-group timeout, s: a rank left waiting fails after this long."""
DEADLINE_S = 10.0
"""The whole launch, s."""
PS_TIMEOUT_S = 5.0
"""The parameter server's own timeout, s: a node that hears nothing this long fails. Longer
than :data:`TIMEOUT_S`, so that a worker's receive on the process group gives up first."""


def launch(launcher: str, fault: str, marks: str) -> object:
    from tests.backends import fault_fns

    if launcher in ("spawn", "shaped"):
        from backends.launch import spawn

        shaped = {"network": "shaped", "bandwidth": "1gbit"} if launcher == "shaped" else {}
        return spawn(fault_fns.spawn_rank, 2, fault, marks, backend="gloo", timeout=TIMEOUT_S,
                     deadline=DEADLINE_S, **shaped)  # type: ignore[arg-type]
    if launcher == "ps":
        from backends.parameter_server import PSConfig
        from backends.parameter_server.train import train

        cfg = PSConfig(servers=1, workers=2, consistency="ssp", tau=0, iterations=4,
                       features=64, batch_size=8, timeout_s=PS_TIMEOUT_S)
        return train(cfg, fault_fns.FaultyWait(fault, marks), timeout=TIMEOUT_S)
    raise SystemExit(f"unknown launcher {launcher!r}")


def main(argv: list[str]) -> int:
    from backends.launch import RankError

    # a background job of a shell starts with SIGINT ignored; this one stands for a terminal's
    signal.signal(signal.SIGINT, signal.default_int_handler)
    launcher, fault, marks = argv
    try:
        launch(launcher, fault, marks)
    except RankError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"INTERRUPTED: {exc!r}", file=sys.stderr)
        return 128 + (signal.SIGTERM if str(exc) == "SIGTERM" else signal.SIGINT)
    print("OK", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
