"""What the CLI refuses before any work starts, and what it never deletes or overwrites.

Each case is a request a careful user might make by mistake: a report into a folder that holds
their files, a sweep too large for the machine, a message smaller than one element, an output
that is a file. Each is one line on stderr, exit status 2, no rank started, nothing written.
"""

import json
import os

import pytest

from lab.cli import main
from lab.outputs import MANIFEST, check_report_folder, replace_report, write_manifest
from lab.units import UsageError
from tests.lab.test_cli import fake_calibration  # noqa: F401 (a fixture)


def snapshot(folder):
    """Every path under ``folder`` with its size and contents' modification time."""
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in folder.rglob("*"))


def refused(argv, capsys):
    """Run the CLI; return its one-line error (asserting exit status 2)."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("distml-lab: error:"), err
    return err


# ---- 1. report --out never deletes what the lab did not write -------------------------------

@pytest.mark.parametrize("where", ["a folder of mine", "the working directory"])
def test_report_refuses_a_folder_holding_other_files(tmp_path, capsys, monkeypatch, no_work,
                                                     where):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    monkeypatch.chdir(mine)
    out = "." if where == "the working directory" else str(mine)
    before = snapshot(tmp_path)
    err = refused(["report", "--out", out, "--quick", "--calibration",
                   str(tmp_path / "cal.json")], capsys)
    assert "thesis.tex" in err
    assert snapshot(tmp_path) == before


def test_a_report_the_lab_wrote_is_replaced_and_nothing_else_is_touched(tmp_path):
    old = tmp_path / "report"
    old.mkdir()
    (old / "index.md").write_text("old")
    (old / "ping_pong.png").write_bytes(b"old")
    write_manifest(old)
    check_report_folder(old)  # the lab's own: accepted
    built = tmp_path / ".report-new"
    built.mkdir()
    (built / "index.md").write_text("new")
    write_manifest(built)
    assert replace_report(built, old) == old
    assert (old / "index.md").read_text() == "new" and not (old / "ping_pong.png").exists()
    assert json.loads((old / MANIFEST).read_text())["files"] == ["index.md"]
    (old / "notes.txt").write_text("mine, added later")
    with pytest.raises(UsageError, match=r"notes\.txt"):
        check_report_folder(old)


def test_a_file_added_to_an_old_report_while_a_new_one_is_built_survives(tmp_path):
    old = tmp_path / "report"
    old.mkdir()
    (old / "index.md").write_text("old")
    write_manifest(old)
    (old / "notes.txt").write_text("mine")
    built = tmp_path / ".report-new"
    built.mkdir()
    (built / "index.md").write_text("new")
    moved = replace_report(built, old)
    assert moved != old and (moved / "index.md").read_text() == "new"
    assert (old / "notes.txt").read_text() == "mine"


# ---- 6. an output that cannot be written is found before measuring --------------------------

@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize("make", ["a file", "under a file"])
def test_an_out_that_is_a_file_is_refused_before_measuring(tmp_path, capsys, no_work, command,
                                                           make):
    (tmp_path / "results").write_text("a file of mine")
    out = tmp_path / "results" if make == "a file" else tmp_path / "results" / "sub"
    argv = (["compare", "ping_pong", "--world", "2", "--sizes", "1KiB"] if command == "compare"
            else ["report", "--quick"])
    before = snapshot(tmp_path)
    err = refused([*argv, "--out", str(out), "--calibration", str(tmp_path / "cal.json")],
                  capsys)
    assert "is a file" in err
    assert snapshot(tmp_path) == before


# ---- 9. compare --out keeps earlier results unless --force ----------------------------------

def test_compare_out_keeps_earlier_results(tmp_path, capsys, no_work):
    out = tmp_path / "out"
    out.mkdir()
    (out / "ping_pong.csv").write_text("yesterday's run")
    before = snapshot(tmp_path)
    err = refused(["compare", "ping_pong", "--world", "2", "--sizes", "1KiB", "--out", str(out),
                   "--calibration", str(tmp_path / "cal.json")], capsys)
    assert "already exists" in err and "--force" in err
    assert snapshot(tmp_path) == before


def test_compare_force_gets_past_the_check(tmp_path, capsys, fake_calibration,  # noqa: F811
                                           monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "ping_pong.csv").write_text("yesterday's run")

    def measured(*args, **kwargs):
        raise RuntimeError("measuring")  # the check passed: the run would start here

    monkeypatch.setattr("lab.compare.ensure_calibrated", measured)
    with pytest.raises(RuntimeError, match="measuring"):
        main(["compare", "ping_pong", "--world", "2", "--sizes", "1KiB", "--out", str(out),
              "--force", "--calibration", str(fake_calibration)])


# ---- 4. bounds: oversized requests are refused, not run into the OOM killer ------------------

@pytest.mark.parametrize("argv, says", [
    (["simulate", "zero", "--params", "1B", "--stage", "3", "--dp", "1000000", "--cluster",
      "a100"], "at most 1024 ranks"),
    (["simulate", "zero", "--params", "1B", "--stage", "3", "--dp", "100000000"],
     "invalid --dp 100000000"),
    (["plan", "--model", "gpt3-175b", "--gpus", "1000000", "--cluster", "a100"],
     "invalid --gpus 1000000"),
    (["plan", "--model", "gpt3-175b", "--gpus", "64", "--global-batch", "100000", "--cluster",
      "a100"], "invalid --global-batch 100000"),
    (["simulate", "megatron", "--model", "gpt3-175b", "--cluster", "a100", "--tp", "8", "--pp",
      "16", "--dp", "1", "--global-batch", "1000000", "--micro-batch", "1"], "m·p·v"),
    (["simulate", "all_reduce.ring", "--world", "100000", "--cluster", "a100"],
     "at most 65536 ranks"),  # its fast path's limit (lab.checks.MAX_FAST_RANKS)
    (["simulate", "all_reduce.binary_tree", "--world", "100000", "--cluster", "a100"],
     "at most 65536 ranks"),  # the binary tree has a fast path on a100 too
    (["simulate", "all_reduce.rabenseifner", "--world", "100000", "--cluster", "a100"],
     "at most 1024 ranks"),  # no fast path: the events engine's limit
    (["simulate", "horovod", "--world", "100000", "--cluster", "a100"], "invalid --world"),
    (["simulate", "horovod", "--world", "2", "--widths", "8x100000000", "--cluster", "a100"],
     "invalid --widths"),
    (["run", "ping_pong", "--world", "1000", "--sizes", "1KiB"], "at most 64 ranks"),
    (["run", "all_reduce.ring", "--world", "4", "--sizes", "64GiB"], "need about"),
    (["compare", "ping_pong", "--world", "2", "--sizes", "1KiB", "--repeats", "1000000000"],
     "invalid --repeats"),
    (["horovodrun", "-np", "100000", "true"], "invalid --num-proc 100000"),
    (["calibrate", "--world", "500"], "at most 64 ranks"),
])
def test_oversized_requests_are_refused_at_once(argv, says, capsys, no_work,
                                                fake_calibration):  # noqa: F811
    if argv[0] in ("simulate", "compare", "calibrate") and argv[1] not in (
            "zero", "megatron", "horovod"):
        argv = [*argv, "--calibration", str(fake_calibration)]
    assert says in refused(argv, capsys)


# ---- 6 and 8. bad values: one line, not a traceback, not the default sweep -------------------

@pytest.mark.parametrize("argv, says", [
    (["simulate", "ping_pong", "--sizes", ""], "empty size list"),
    (["simulate", "ping_pong", "--world", ""], "invalid world size ''"),
    (["simulate", "ping_pong", "--sizes", "0"], "invalid size 0 B"),
    (["simulate", "all_reduce.ring", "--world", "2", "--sizes", "3"], "one float32 element"),
    (["simulate", "all_gather.ring", "--world", "4", "--sizes", "8"], "per rank"),
    (["simulate", "ping_pong", "--sizes", "100000000000000000000000000000000GiB"],
     "at most 1TiB"),
    (["simulate", "ping_pong", "--sizes", "9" * 400], "not a whole number"),
    (["simulate", "zero", "--params", "1e400", "--stage", "1", "--dp", "4"], "--params"),
    (["simulate", "zero", "--params", "1e17", "--stage", "1", "--dp", "4"], "at most"),
    (["store-demo", "--missing-timeout", "nan"], "invalid --missing-timeout nan"),
    (["horovodrun", "-np", "2", "--start-timeout", "inf", "true"], "--start-timeout inf"),
])
def test_bad_values_are_one_line(argv, says, capsys, no_work, fake_calibration):  # noqa: F811
    if argv[0] == "simulate" and argv[1] != "zero":
        argv = [*argv, "--calibration", str(fake_calibration)]
    assert says in refused(argv, capsys)


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="this machine has a GPU")
@pytest.mark.parametrize("command", ["run", "compare", "calibrate"])
def test_nccl_without_gpus_is_one_line(command, capsys, no_work, tmp_path):
    argv = ["calibrate"] if command == "calibrate" else [command, "ping_pong", "--sizes", "1KiB"]
    if command != "run":
        argv += ["--calibration", str(tmp_path / "c.json")]
    err = refused([*argv, "--backend", "nccl"], capsys)
    assert "needs one CUDA GPU per rank" in err
