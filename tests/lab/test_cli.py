"""The CLI: bad input is one line and exit status 2; JSON output has the agreed fields."""

import json
import os
import subprocess
import sys

import pytest

from lab.cli import main
from simulator.core.calibration import CalibrationEntry, save_entry, this_host

FIELDS = {"twin", "world", "bytes", "predicted_s", "measured_median_s", "measured_p10_s",
          "measured_p90_s", "rel_error"}


@pytest.fixture
def fake_calibration(tmp_path):
    """A calibration file with made-up numbers, for simulation-only commands."""
    path = tmp_path / "cal.json"
    for world in (2, 3, 4):
        save_entry(CalibrationEntry(this_host(), "gloo", world, 5e-5, 4e9, 1.2e10, 1.4e10,
                                    1e11), path)
    return path


BAD = [
    (["simulate", "ping_pong", "--world", "0"], "world needs at least 1 rank"),
    (["simulate", "ping_pong", "--world", "-2"], "invalid world size"),
    (["simulate", "ping_pong", "--sizes", "12XB"], "invalid size '12XB'"),
    (["simulate", "ping_pong", "--sizes", "-5"], "invalid size '-5'"),
    (["simulate", "nosuchtwin"], "unknown twin 'nosuchtwin'"),
    (["simulate", "ping_pong", "--world", "1"], "needs a world of at least 2"),
    (["simulate", "ping_pong", "--cluster", "tpu"], "unknown cluster 'tpu'"),
    (["compare", "ping_pong", "--repeats", "0"], "--repeats"),
    (["run", "ping_pong", "--world", "x"], "invalid world size 'x'"),
    (["calibrate", "--world", "1"], "at least 2 ranks"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
]


@pytest.mark.parametrize("argv, message", BAD)
def test_bad_input_is_one_line_and_exit_status_2(argv, message, capsys, fake_calibration):
    assert main([*argv, "--calibration", str(fake_calibration)] if argv and argv[0] in (
        "simulate", "compare", "calibrate") else argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("distml-lab: error:"), err
    assert message in err


def test_unreadable_calibration_file_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "cal.json"
    path.write_text("garbage")
    assert main(["simulate", "ping_pong", "--calibration", str(path)]) == 2
    err = capsys.readouterr().err
    assert "cannot read calibration file" in err and err.count("\n") == 1


def test_missing_calibration_says_to_calibrate(tmp_path, capsys):
    assert main(["simulate", "ping_pong", "--calibration", str(tmp_path / "none.json")]) == 2
    assert "run 'distml-lab calibrate --world 2'" in capsys.readouterr().err


def test_real_process_exit_status_and_no_traceback(tmp_path):
    out = subprocess.run([sys.executable, "-m", "lab.cli", "compare", "ping_pong", "--sizes",
                          "12XB", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_list_json_names_the_twins(capsys):
    assert main(["list", "--json"]) == 0
    names = [t["name"] for t in json.loads(capsys.readouterr().out)["twins"]]
    assert {"ping_pong", "one_to_all"} <= set(names)


def test_simulate_on_a_preset_matches_the_closed_form(capsys):
    assert main(["simulate", "ping_pong", "--cluster", "a100", "--world", "2", "--sizes",
                 "1MiB,64MiB", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)["records"]
    assert [r["bytes"] for r in records] == [2**20, 2**26]
    for r in records:
        assert r["predicted_s"] == pytest.approx(r["closed_form_s"])


def test_simulate_local_uses_the_calibration(capsys, fake_calibration):
    assert main(["simulate", "one_to_all", "--world", "4", "--sizes", "1MiB", "--json",
                 "--calibration", str(fake_calibration)]) == 0
    (record,) = json.loads(capsys.readouterr().out)["records"]
    # three sends in turn; gloo's first one waits for its receiver's ready notice (α where
    # the calibration did not measure it); the others find their receives long posted
    assert record["predicted_s"] == pytest.approx(3 * (5e-5 + 2**20 / 4e9) + 5e-5)


def test_compare_end_to_end_prints_one_json_document(tmp_path):
    """Calibrates (quick) on first use, then predicts and measures for real."""
    env = {**os.environ, "DISTML_CALIBRATION": str(tmp_path / "cal.json")}
    out = subprocess.run([sys.executable, "-m", "lab.cli", "compare", "one_to_all", "--world",
                          "2", "--sizes", "64KiB,1MiB", "--repeats", "5", "--quick", "--json",
                          "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert [(r["world"], r["bytes"]) for r in doc["records"]] == [(2, 65536), (2, 2**20)]
    for r in doc["records"]:
        assert set(r) >= FIELDS
        assert r["measured_p10_s"] <= r["measured_median_s"] <= r["measured_p90_s"]
        assert r["rel_error"] == pytest.approx(
            (r["predicted_s"] - r["measured_median_s"]) / r["measured_median_s"])
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "one_to_all.csv", "one_to_all.json", "one_to_all.png"}


def test_the_calibration_summary_shows_a_reduction_among_messages():
    from lab.calibrate import _among_messages

    entry = CalibrationEntry("h", "gloo", 4, 5e-5, 4e9, 2**20 / 4e-4, 1.4e10, 1e11,
                             exchange_sizes=[2**19, 2**20, 2**22],
                             shift_ahead_times_s=[3e-4, 6e-4, 2e-3],
                             reduce_ahead_times_s=[4e-4, 1.1e-3, 3e-3])
    assert _among_messages(entry) == (", a 1 MiB reduction among messages 500 µs "
                                      "(γ·n 400 µs)")
    bare = CalibrationEntry("h", "gloo", 4, 5e-5, 4e9, 1e10, 1.4e10, 1e11)
    assert _among_messages(bare) == ""
