"""Random bad values for every flag of every command, and for every calibration field: each is
one line on stderr, exit status 2, no rank started and nothing written.

The flags are read off the parsers themselves, so a flag added later without a strategy for
its bad values fails :func:`test_every_flag_has_bad_values`.
"""

import argparse
import contextlib
import io
import math
import tempfile
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.cli import _Parser, build_parser, main
from lab.report import CHAPTERS
from lab.simulate_models import MODELS
from lab.simulate_models import build_parser as model_parser
from simulator.core.calibration import CalibrationEntry, save_entry, this_host
from tests.simulator.test_calibration_file import bad_fields, file_with, measured

CAL = "{cal}"
OUT = "{tmp}/out"
BASE = {
    "simulate": ["simulate", "ping_pong", "--world", "2", "--sizes", "1KiB", "--calibration",
                 CAL],
    "run": ["run", "ping_pong", "--world", "2", "--sizes", "1KiB"],
    "compare": ["compare", "ping_pong", "--world", "2", "--sizes", "1KiB", "--calibration", CAL,
                "--out", OUT],
    "calibrate": ["calibrate", "--world", "2", "--calibration", CAL],
    "report": ["report", "--quick", "--out", OUT, "--calibration", CAL],
    "store-demo": ["store-demo"],
    "list": ["list"],
    "horovodrun": ["horovodrun", "-np", "2"],
    "plan": ["plan", "--model", "gpt3-175b", "--gpus", "64", "--cluster", "a100"],
    "simulate zero": ["simulate", "zero", "--params", "1B", "--stage", "1", "--dp", "4"],
    "simulate megatron": ["simulate", "megatron", "--model", "gpt3-175b", "--cluster", "a100",
                          "--tp", "8", "--pp", "8", "--dp", "1", "--global-batch", "64",
                          "--micro-batch", "1"],
    "simulate horovod": ["simulate", "horovod", "--world", "2", "--cluster", "a100"],
    "grade": ["grade", "{tmp}", "--out", "{tmp}/grades.csv"],
}
"""A valid command line of each command (``{cal}``, ``{tmp}``: filled in per example)."""

WORD = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)
JUNK = st.sampled_from(["", " ", "x", "nan", "inf", "-inf", "1e400", "½", "0x10", "2,,4",
                        "3 4", "1.5.2", "None", "1e", "٣"])


def outside(bounds):
    """Numbers outside a :func:`lab.units.whole` or :func:`lab.units.number` range, as text."""
    if len(bounds) == 2:  # whole
        lo, hi = bounds
        return st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1),
                         st.sampled_from([f"{lo + 0.5}", "1e3"])).map(str)
    lo, hi, lo_open = bounds
    below = st.floats(max_value=lo, exclude_max=not lo_open, allow_nan=False)
    above = st.floats(min_value=hi, exclude_min=True, allow_nan=False)
    return st.one_of(below, above, st.just(math.nan)).map(repr)


BAD_TEXT = {
    "world": st.one_of(st.sampled_from(["0", "-1", "", "2,", "1e3", "2.5", "4096", "2,0"]),
                       st.integers(min_value=1025).map(str)),
    "sizes": st.one_of(st.sampled_from(["", "0", "-5", "1XB", "2KiB:1KiB", "1KiB:2KiB:x1",
                                        "0:1KiB", "9" * 400, "2TiB", "1:2:3:4", ","]),
                       st.integers(min_value=2**40 + 1).map(str)),
    "network": WORD.filter(lambda w: w not in ("loopback", "shaped")),
    "bandwidth": st.one_of(WORD, st.sampled_from(["0", "-1gbit", "1gbit"])),
    "cluster": WORD.filter(lambda w: w not in ("local", "a100", "h100", "ethernet_10g")),
    "model": WORD.filter(lambda w: not w.startswith("gpt")),
    "params": st.sampled_from(["1e400", "-1", "x", "1e16", "1.5", "", "1e15.5", "inf"]),
    "interleave": st.sampled_from(["0", "x", "", "65", "1,,2", "-1", ",".join(["1"] * 17)]),
    "widths": st.sampled_from(["1", "0,5", "8x0", "8x2000", "x", "2097152,2", "8x", "a,b"]),
    "path": st.sampled_from(["a file", "under a file"]),
    "chapter": st.one_of(WORD, st.sampled_from(["", "٣", "-1", "1.5", "2-3", " "])),
    "chapters": st.one_of(WORD, st.sampled_from(["", "0", str(CHAPTERS[-1] + 1), "1,,2", "1.5",
                                                 "٣", "2-3"])),
}
"""Bad values of the flags that take free text, by the flag's destination."""


def flags():
    """``(command, flag, destination, bad-value strategy)`` of every option and positional of
    every command (``None`` where no strategy is known)."""
    parsers = {}
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.update(action.choices)
    for name in MODELS:
        parsers[f"simulate {name}"] = model_parser(name, "distml-lab", _Parser)
    for command, parser in parsers.items():
        for action in parser._actions:
            if action.nargs == 0 or isinstance(action, argparse._HelpAction):
                continue  # a switch takes no value
            flag = action.option_strings[-1] if action.option_strings else None
            yield command, flag, action.dest, strategy(action)


def strategy(action):
    """The bad values of one argparse action."""
    if getattr(action.type, "bounds", None):
        return st.one_of(outside(action.type.bounds), JUNK.filter(lambda t: t != "1e3"))
    if action.choices:
        return WORD.filter(lambda w: w not in action.choices)
    if action.dest in ("calibration", "out", "submissions", "measured", "cluster_out"):
        return BAD_TEXT["path"]
    if action.dest == "twin":
        return WORD.filter(lambda w: w not in ("ping_pong", "stream", "one_to_all"))
    if action.dest == "task_command":
        return st.just(None)  # no command at all
    return BAD_TEXT.get(action.dest)


FLAGS = list(flags())


def test_every_flag_has_bad_values():
    assert [(c, f) for c, f, _, s in FLAGS if s is None] == []
    assert len(FLAGS) > 70


def argv_with(command, flag, dest, value, tmp: Path):
    """The command's valid line with ``value`` put in for ``flag`` (or the positional)."""
    cal = tmp / "cal.json"
    argv = [a.format(cal=cal, tmp=tmp) for a in BASE[command]]
    if value in ("a file", "under a file"):
        (tmp / "mine.txt").write_text("my notes")
        value = str(tmp / "mine.txt" if value == "a file" else tmp / "mine.txt" / "x")
    if dest in ("twin", "submissions"):  # the positional
        argv[1] = value
    elif dest == "task_command":
        return argv
    else:
        argv += [flag, value]
    return argv + (["true"] if command == "horovodrun" else [])


def snapshot(folder: Path):
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in folder.rglob("*"))


def run_refused(argv, tmp: Path):
    """Run the CLI in-process; return (exit status, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


@pytest.mark.parametrize("command, flag, dest, bad", FLAGS,
                         ids=[f"{c} {f or d}" for c, f, d, _ in FLAGS])
@settings(max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_bad_value_of_any_flag_is_one_line_and_writes_nothing(no_work, monkeypatch, command,
                                                                flag, dest, bad, data):
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        monkeypatch.setenv("DISTML_CALIBRATION", str(tmp / "cal.json"))
        for world in (2, 3, 4):  # a calibration the simulations can read
            save_entry(CalibrationEntry(this_host(), "gloo", world, 5e-5, 4e9, 1.2e10,
                                        1.4e10, 1e11), tmp / "cal.json")
        argv = argv_with(command, flag, dest, data.draw(bad, label="value"), tmp)
        before = snapshot(tmp)
        code, err = run_refused(argv, tmp)
        assert code == 2, (argv, err)
        assert err.count("\n") == 1 and err.startswith("distml-lab: error:"), (argv, err)
        assert snapshot(tmp) == before, argv


@settings(max_examples=30)
@given(bad=bad_fields(), command=st.sampled_from([
    ["simulate", "all_reduce.ring", "--world", "3", "--sizes", "1MiB"],
    ["simulate", "horovod", "--world", "3"],
    ["compare", "ping_pong", "--world", "3", "--sizes", "1KiB"],
    ["calibrate", "--world", "3"]]))
def test_a_bad_calibration_field_is_one_line_and_the_file_is_kept(bad, command):
    field, value = bad
    raw = asdict(measured(3, host=this_host()))
    raw[field] = value
    with tempfile.TemporaryDirectory() as name:
        path = file_with(Path(name) / "cal.json", f"{this_host()}/gloo/3", raw)
        before = path.read_bytes()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("DISTML_CALIBRATION", str(path))
            mp.setattr("backends.launch.run_ranks", _no_rank)
            code, err = run_refused(command, Path(name))
        assert code == 2, (field, value, err)
        assert err.count("\n") == 1 and err.startswith("distml-lab: error:"), err
        assert path.read_bytes() == before


def _no_rank(*args, **kwargs):
    raise AssertionError("a rank started")
