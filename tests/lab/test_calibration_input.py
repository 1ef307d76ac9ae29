"""A calibration file with a bad value: one line from the CLI, exit status 2, no traceback."""

from dataclasses import asdict

import pytest

from lab.cli import main
from simulator.core.calibration import this_host
from tests.simulator.test_calibration_file import file_with, measured


@pytest.mark.parametrize("field, value, says", [
    ("latency_s", "fast", "latency_s must be a number, not 'fast'"),
    ("bandwidth_Bps", 0, "bandwidth_Bps must be above zero"),
    ("reduce_Bps", None, "reduce_Bps must be a number"),
])
def test_the_cli_answers_a_bad_calibration_value_in_one_line(tmp_path, capsys, field, value,
                                                            says):
    raw = asdict(measured(2, host=this_host()))
    raw[field] = value
    path = file_with(tmp_path / "cal.json", f"{this_host()}/gloo/2", raw)
    code = main(["simulate", "all_reduce.ring", "--world", "2", "--sizes", "1MiB",
                 "--calibration", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and says in err and "Traceback" not in err


@pytest.mark.parametrize("make", ["a folder", "unreadable", "under a file"])
def test_calibrate_refuses_a_file_it_cannot_save_before_measuring(tmp_path, capsys,
                                                                  monkeypatch, make):
    spawned: list[object] = []
    monkeypatch.setattr("backends.launch.spawn", lambda *a, **k: spawned.append(a))
    path = tmp_path / "cal.json"
    if make == "a folder":
        path.mkdir()
    elif make == "unreadable":
        path.write_text("{half a file")
    else:
        (tmp_path / "notes.txt").write_text("mine")
        path = tmp_path / "notes.txt" / "cal.json"
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code = main(["calibrate", "--world", "2", "--quick", "--calibration", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert spawned == []  # refused before any rank started
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
