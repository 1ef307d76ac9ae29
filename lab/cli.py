"""``distml-lab``: the command line of the lab.

    distml-lab list [--json]
    distml-lab calibrate [--world 2,4] [--backend gloo] [--quick] [--json]
    distml-lab simulate TWIN [--world 2,4] [--sizes 64KiB:64MiB] [--cluster local|a100|…] [--json]
    distml-lab simulate MODEL [options] [--json]    (MODEL: zero …, see lab/simulate_models.py)
    distml-lab plan --model gpt3-175b --gpus 1024 --cluster a100 [--json]   (ch. 12)
    distml-lab run TWIN [--world 2] [--sizes …] [--repeats R] [--json]
    distml-lab compare TWIN [--world 2,4] [--sizes …] [--repeats R] [--quick] [--out DIR] [--json]
    distml-lab report [--out report] [--quick]
    distml-lab store-demo [--world 4] [--missing-timeout 0.5] [--json]   (ch. 5 rendezvous)
    distml-lab horovodrun -np 4 [--cycle-time-ms 1] [--fusion-threshold-mb 64]
                          [--start-timeout 30] python train.py ARGS…          (ch. 7 launcher)
    distml-lab grade SUBMISSIONS [--out grades.csv] [--time-limit 1800]   (the course)

``calibrate``, ``run``, ``compare`` take ``--network shaped --bandwidth 1gbit`` (or a rate per
rank): ranks in network namespaces on rate-limited links (:mod:`backends.shaped`; root).

Bad input gets one line on stderr and exit status 2, never a traceback; long work shows
progress on stderr; ``--json`` prints one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from lab.checks import (
    ENGINES,
    MAX_REPEATS,
    check_backend,
    check_cluster,
    check_network,
    check_real_ranks,
    check_sweep,
)
from lab.cli_launchers import cmd_grade, cmd_horovodrun, cmd_store_demo
from lab.strategy_cli import list_twins
from lab.tables import format_table
from lab.units import UsageError, parse_sizes, parse_worlds, usage_line, whole
from simulator.core.calibration import Calibration

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (no usage dump), exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{usage_line(message)} (see '{self.prog} --help')")


def _common(p: argparse.ArgumentParser, sweep: bool = True, repeats: bool = False,
            calibration: bool = True) -> None:
    if sweep:
        p.add_argument("twin", help="twin name (see 'distml-lab list')")
        p.add_argument("--world", help="world sizes, e.g. 2,4 (default: the twin's sweep)")
        p.add_argument("--sizes", help="message sizes: 64KiB:64MiB (×2 steps), 64KiB:64MiB:x4, "
                       "or 1KiB,1MiB (default: the twin's sweep)")
        p.add_argument("--quick", action="store_true", help="the twin's short sweep (and, for "
                       "compare, a quick calibration where one is needed)")
    if repeats:
        p.add_argument("--repeats", type=whole(1, MAX_REPEATS), default=20,
                       help=f"timed repeats per point (1-{MAX_REPEATS}, default 20)")
        p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
        _network_options(p)
    if calibration:  # not for run: a measurement needs none
        p.add_argument("--calibration", help="calibration file (default: $DISTML_CALIBRATION "
                       "or ~/.cache/distml-lab/calibration.json)")
        p.add_argument("--model", choices=["textbook", "host", "both"], default="host",
                       help="the simulated twin's tier: the textbook's α-β-γ model, the host "
                       "model (textbook plus this machine's measured host effects), or both "
                       "side by side (default host)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def _network_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--network", default="loopback", help="loopback (default) or shaped: each "
                   "rank in a network namespace on a rate-limited link (needs root)")
    p.add_argument("--bandwidth", help="shaped links' rate: 1gbit, or one per rank "
                   "(1gbit,1gbit,100mbit)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for the docs and tests)."""
    parser = _Parser(prog="distml-lab", description="Distributed ML, predicted and measured.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("list", help="the registered twins")
    p.add_argument("--chapter", help="only the twins of this chapter of the book")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("calibrate", help="measure this machine's primitives")
    p.add_argument("--world", default="2", help="world sizes to calibrate, e.g. 2,3,4")
    p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    p.add_argument("--cluster-out", help="write a cluster file for --cluster FILE instead")
    _network_options(p)
    _common(p, sweep=False)
    p = sub.add_parser("simulate", help="predict with the simulated twin")
    _common(p)
    _network_options(p)
    p.add_argument("--cluster", default="local", help="local (calibrated), a preset (a100, "
                   "h100, ethernet-10g) or a cluster file (calibrate --cluster-out FILE.json)")
    p.add_argument("--engine", default="auto", choices=ENGINES, help="auto (default): an "
                   "exact fast path where the twin has one on the cluster, else per-rank events")
    p.add_argument("--progress", action="store_true", help="a progress bar even with --json")
    p = sub.add_parser("run", help="measure the real twin")
    _common(p, repeats=True, calibration=False)
    p = sub.add_parser("compare", help="predict and measure, side by side")
    _common(p, repeats=True)
    p.add_argument("--out", help="also write TWIN.csv, TWIN.json and TWIN.png into this folder "
                   "(checked before measuring; existing files are kept unless --force)")
    p.add_argument("--force", action="store_true", help="let --out replace files of the same "
                   "names")
    p.add_argument("--measured", help="compare the records python -m lab.run wrote in this "
                   "folder (torchrun, one machine or several) instead of measuring here")
    p = sub.add_parser("report", help="the tour: calibrate, compare every twin, write a report")
    p.add_argument("--out", default="report", help="output folder (default: report): new, "
                   "empty, or a report written before, which is replaced; a folder holding "
                   "other files is refused")
    p.add_argument("--quick", action="store_true", help="shortest sweeps, one world each")
    p.add_argument("--chapters", help="only these chapters of the book, e.g. 1,2,5 (default: "
                   "every chapter)")
    p.add_argument("--model", choices=["textbook", "host", "both"], default="both",
                   help="the simulated twin's tier(s) (default both, side by side)")
    p.add_argument("--calibration", help="calibration file")
    from lab.cli_launchers import launcher_arguments
    from lab.megatron import plan_arguments

    launcher_arguments(sub)

    plan_arguments(sub.add_parser("plan", help="rank (t, p, d, micro-batch) for a GPT on a "
                                  "cluster, by predicted throughput"))
    return parser


def _sweep(args: argparse.Namespace, real: bool = False, engine: str = "events"
           ) -> tuple[Any, list[int], list[int]]:
    """The twin, worlds and sizes asked for, checked (:func:`lab.checks.check_sweep`, the
    worlds for ``engine``); a real run's backend too (the commands route a strategy twin
    elsewhere first)."""
    from lab.strategies import get_strategy
    from lab.twins import get_twin

    strategy = get_strategy(args.twin)
    if strategy is not None:  # the callers route strategy twins before checking a sweep
        raise UsageError(f"{strategy.name} is a strategy twin: it sweeps {strategy.parameter}")
    try:
        twin = get_twin(args.twin)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    worlds = parse_worlds(args.world) if args.world is not None else list(
        twin.quick_worlds if args.quick else twin.worlds)
    sizes = parse_sizes(args.sizes) if args.sizes is not None else list(
        twin.quick_sizes if args.quick else twin.sizes)
    check_sweep(twin, worlds, sizes, real, engine)
    if real:
        check_backend(args.backend, max(worlds))
    return twin, worlds, sizes


def _emit(args: argparse.Namespace, doc: Any, table: list[dict[str, Any]],
          columns: Sequence[tuple[str, str]]) -> None:
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(format_table(table, columns))


def cmd_calibrate(args: argparse.Namespace) -> None:
    """``distml-lab calibrate``."""
    from lab.calibrate import calibrate, calibration_sweep, describe_entry
    from lab.cluster_file import write_cluster_file
    from simulator.core.calibration import check_writable

    worlds = parse_worlds(args.world)
    if any(w < 2 for w in worlds):
        raise UsageError("calibration needs a world of at least 2 ranks (a ping-pong)")
    check_real_ranks(worlds, max(calibration_sweep(args.quick)["sizes"]))
    check_backend(args.backend, max(worlds))
    network, bandwidth = check_network(args, worlds)
    if args.cluster_out is not None:
        return write_cluster_file(args, max(worlds), network)
    check_writable(args.calibration)
    entries = []
    for world in worlds:
        print(f"calibrating {args.backend} with {world} ranks on {network} ...", file=sys.stderr)
        entries.append(calibrate(world, args.backend, path=args.calibration, network=network,
                                 bandwidth=bandwidth, progress=True,
                                 **calibration_sweep(args.quick)))
    if args.json:
        print(json.dumps({"entries": [asdict(e) for e in entries]}, indent=2))
        return
    print("\n".join(describe_entry(e) for e in entries))


def cmd_simulate(args: argparse.Namespace) -> None:
    """``distml-lab simulate``: every world's cluster and engine chosen and checked first."""
    from tqdm import tqdm

    from lab.checks import check_fast_found
    from lab.predict import plan, predict
    from lab.strategies import get_strategy
    from lab.strategy_cli import simulate_strategy
    from simulator.host.factory import tiers_of

    strategy = get_strategy(args.twin)
    if strategy is not None:
        simulate_strategy(args, strategy)
        return
    twin, worlds, sizes = _sweep(args, engine=args.engine)
    check_cluster(args.cluster)
    network, bandwidth = check_network(args, worlds, machine=False)
    calibration = Calibration.load(args.calibration) if args.cluster == "local" else None
    plans = []
    for model in tiers_of(args.model):
        for world in worlds:
            chosen = plan(twin, world, args.cluster, calibration, network=network,
                          bandwidth=bandwidth, model=model, engine=args.engine)
            check_fast_found(twin.name, world, args.engine, chosen.fast is not None,
                             chosen.label)
            plans.append((model, world, chosen))
    bar = tqdm(total=len(plans) * len(sizes), desc=f"simulate {twin.name}", unit="point",
               file=sys.stderr, leave=False, disable=not args.progress and (args.json or None))
    try:
        rows = [row for model, world, chosen in plans
                for row in predict(twin, world, sizes, args.cluster, calibration,
                                   network=network, bandwidth=bandwidth, model=model,
                                   chosen=chosen, on_point=lambda: bar.update(1))]
    finally:
        bar.close()
    _emit(args, {"records": rows}, rows, [("world", "world"), ("bytes", "size"),
          ("model", "model"), ("engine", "engine"), ("predicted_s", "predicted(us)"),
          ("closed_form_s", "closed form(us)")])


def cmd_run(args: argparse.Namespace) -> None:
    """``distml-lab run``."""
    from lab.compare import run_real
    from lab.strategies import get_strategy
    from lab.strategy_cli import run_strategy

    strategy = get_strategy(args.twin)
    if strategy is not None:
        run_strategy(args, strategy)
        return
    twin, worlds, sizes = _sweep(args, real=True)
    network, bandwidth = check_network(args, worlds)
    rows = []
    for world in worlds:
        for nbytes, t in zip(sizes, run_real(twin, world, sizes, args.repeats, args.backend,
                                             network=network, bandwidth=bandwidth),
                             strict=True):
            rows.append({"twin": twin.name, "world": world, "bytes": nbytes,
                         "measured_median_s": t["median_s"], "measured_p10_s": t["p10_s"],
                         "measured_p90_s": t["p90_s"]})
    _emit(args, {"records": rows}, rows, [("world", "world"), ("bytes", "size"),
          ("measured_median_s", "median(us)"), ("measured_p10_s", "p10(us)"),
          ("measured_p90_s", "p90(us)")])


def cmd_compare(args: argparse.Namespace) -> None:
    """``distml-lab compare``."""
    from lab.compare import compare, ensure_calibrated
    from lab.measured import show_measured
    from lab.outputs import check_new_files
    from lab.records import median_abs_error, records_as_dicts, write_csv, write_json
    from lab.strategies import get_strategy
    from lab.strategy_cli import compare_strategy
    from simulator.core.calibration import check_writable
    from simulator.host.factory import tiers_of

    if args.measured is not None:
        return show_measured(args)
    strategy = get_strategy(args.twin)
    if strategy is not None:
        compare_strategy(args, strategy)
        return
    twin, worlds, sizes = _sweep(args, real=True)
    network, bandwidth = check_network(args, worlds)
    names = [f"{twin.name}.{ext}" for ext in ("csv", "json", "png")]
    if args.out is not None:
        check_new_files(Path(args.out), names, args.force)
    check_writable(args.calibration)  # a first comparison calibrates, and saves that
    ensure_calibrated(worlds, args.backend, args.calibration, quick=args.quick,
                      log=lambda m: print(m, file=sys.stderr), network=network,
                      bandwidth=bandwidth)
    records = compare(twin, worlds, sizes, args.repeats, Calibration.load(args.calibration),
                      args.backend, network=network, bandwidth=bandwidth,
                      models=tiers_of(args.model))
    rows = records_as_dicts(records)
    if args.out:
        from lab.plots import plot_compare

        out = Path(args.out)
        write_csv(rows, out / names[0])
        write_json({"records": rows}, out / names[1])
        plot_compare(records, out / names[2])
    columns = [("world", "world"), ("bytes", "size"), ("predicted_s", "predicted(us)"),
               ("measured_median_s", "measured(us)"), ("measured_p10_s", "p10(us)"),
               ("measured_p90_s", "p90(us)"), ("rel_error", "error")]
    if twin.operation:  # a collective: nccl-tests' columns, and PyTorch's built-in beside ours
        columns = [("world", "world"), ("bytes", "size(B)"), ("count", "count"),
                   ("dtype", "type"), ("redop", "redop"), ("root", "root"),
                   ("measured_median_s", "time(us)"), ("algbw_GBps", "algbw(GB/s)"),
                   ("busbw_GBps", "busbw(GB/s)"), ("builtin_median_s", "builtin(us)"),
                   ("builtin_busbw_GBps", "builtin busbw"), ("predicted_s", "predicted(us)"),
                   ("rel_error", "error")]
    if args.model == "both":
        at = columns.index(("rel_error", "error"))
        columns[at:at + 1] = [("predicted_textbook_s", "textbook(us)"),
                              ("rel_error_textbook", "textbook error"),
                              ("rel_error", "host error")]
    _emit(args, {"records": rows, "median_abs_rel_error": median_abs_error(records)}, rows,
          columns)
    if not args.json:
        print(f"median |relative error|: {median_abs_error(records):.1%}"
              + (f" (textbook tier: {median_abs_error(records, 'textbook'):.1%})"
                 if args.model == "both" else ""))


def simulate_model(argv: Sequence[str]) -> None:
    """``distml-lab simulate MODEL …`` (``argv`` starts with MODEL)."""
    from lab.simulate_models import MODELS
    from lab.simulate_models import build_parser as model_parser

    args = model_parser(argv[0], "distml-lab", _Parser).parse_args(argv[1:])
    doc = MODELS[argv[0]].run(args)
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    for label, value in MODELS[argv[0]].lines(doc):
        print(f"{label:<36} {value}")


def cmd_report(args: argparse.Namespace) -> None:
    """``distml-lab report``: the tour."""
    from lab.report import build_report, parse_chapters
    from simulator.host.factory import tiers_of

    path = build_report(Path(args.out), quick=args.quick, calibration=args.calibration,
                        log=lambda m: print(m, file=sys.stderr),
                        chapters=parse_chapters(args.chapters), models=tiers_of(args.model))
    print(f"report written to {path}")


def cmd_plan(args: argparse.Namespace) -> None:
    """``distml-lab plan``: 3D-parallel configurations ranked (chapter 12)."""
    from lab.megatron import plan_table, run_plan

    doc = run_plan(args)
    print(json.dumps(doc, indent=2) if args.json else plan_table(doc, args.top))


COMMANDS = {"list": list_twins, "calibrate": cmd_calibrate, "simulate": cmd_simulate,
            "run": cmd_run, "compare": cmd_compare, "report": cmd_report,
            "store-demo": cmd_store_demo, "plan": cmd_plan, "grade": cmd_grade}
"""Each subcommand's function (``horovodrun``, which returns its job's exit status, apart)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input, 1 for a failed run)."""
    from backends.launch import RankError
    from backends.lifeline import sigterm_unwinds
    from lab.simulate_models import MODELS
    from lab.strategy_cli import strategy_request
    from simulator.core.calibration import CalibrationError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with sigterm_unwinds():  # SIGTERM, like Ctrl-C, unwinds: ranks reaped, nothing left
            if (len(argv) >= 2 and argv[0] == "simulate" and argv[1] in MODELS
                    and not strategy_request(argv[2:])):  # else a strategy twin of that name
                simulate_model(argv[1:])
                return 0
            args = build_parser().parse_args(argv)
            if args.command == "horovodrun":
                return cmd_horovodrun(args)
            COMMANDS[args.command](args)
    except (UsageError, CalibrationError, ValueError) as exc:
        print(f"distml-lab: error: {exc}".splitlines()[0], file=sys.stderr)
        return EXIT_USAGE
    except RankError as exc:
        print(f"distml-lab: {exc}", file=sys.stderr)  # names the rank, then its traceback
        return 1
    except KeyboardInterrupt as exc:
        signalled = exc.args[:1] == ("SIGTERM",)
        print(f"distml-lab: {'terminated' if signalled else 'interrupted'}", file=sys.stderr)
        return 143 if signalled else 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
