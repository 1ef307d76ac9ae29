"""``distml-lab store-demo`` and ``distml-lab horovodrun``: the subcommands that start ranks of
a chapter's runtime for the reader to watch — a TCPStore rendezvous (chapter 5) and Horovod's
launcher (chapter 7) — rather than predict or measure a twin."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lab.checks import MAX_REAL_RANKS
from lab.grade import cmd_grade as cmd_grade  # the CLI takes it from here
from lab.grade import grade_arguments
from lab.units import UsageError, number, whole


def launcher_arguments(sub: Any) -> None:
    """Add ``store-demo``, ``horovodrun`` and ``grade`` (:mod:`lab.grade`) to the subparsers
    ``sub``."""
    p = sub.add_parser("store-demo", help="rendezvous: a TCPStore and process groups, per rank")
    p.add_argument("--world", type=whole(1, 16), default=4, help="ranks (1-16, default 4)")
    p.add_argument("--missing-timeout", type=number(0, 30, lo_open=True), default=0.5,
                   help="seconds to wait for a key nobody sets (default 0.5)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p = sub.add_parser("horovodrun", help="run a command as np Horovod tasks on this machine "
                       "(ch. 7)")
    p.add_argument("-np", "--num-proc", dest="np", type=whole(1, MAX_REAL_RANKS), required=True,
                   help=f"number of task processes (ranks, 1-{MAX_REAL_RANKS})")
    p.add_argument("--cycle-time-ms", type=number(0, 1e4, lo_open=True),
                   help="background thread's cycle time, ms")
    p.add_argument("--fusion-threshold-mb", type=number(0, 2**20),
                   help="fusion buffer size, MiB")
    p.add_argument("--start-timeout", type=number(0, 3600, lo_open=True), default=30.0,
                   help="seconds for every task to reach hvd.init() (default 30)")
    p.add_argument("task_command", metavar="command", nargs=argparse.REMAINDER,
                   help="the program and its arguments")
    grade_arguments(sub)


def cmd_store_demo(args: argparse.Namespace) -> None:
    """``distml-lab store-demo``: what each rank sees in a TCPStore and in sub-groups."""
    from backends.store_demo import format_report, run

    seen = run(args.world, args.missing_timeout)
    print(json.dumps({"ranks": seen}, indent=2) if args.json else format_report(seen))


def cmd_horovodrun(args: argparse.Namespace) -> int:
    """``distml-lab horovodrun``: the job's exit status (:mod:`backends.horovod.runner`)."""
    from backends.horovod.runner import horovodrun

    mb = args.fusion_threshold_mb
    command = args.task_command[1:] if args.task_command[:1] == ["--"] else args.task_command
    if not command:
        raise UsageError("no command to run (e.g. distml-lab horovodrun -np 2 python train.py)")
    return horovodrun(args.np, command, cycle_time_ms=args.cycle_time_ms,
                      fusion_threshold_bytes=None if mb is None else int(mb * 2**20),
                      start_timeout_s=args.start_timeout)
