"""``--network shaped``: bad values and a machine that cannot shape are one line, exit 2;
calibration entries of the shaped network sit beside the loopback ones; a real shaped run."""

from __future__ import annotations

import json
import os

import pytest

from backends import shaped
from lab.cli import main
from simulator.core.calibration import (
    CalibrationEntry,
    find_entry,
    load_calibration,
    save_entry,
    this_host,
)

BAD = [
    (["run", "all_reduce.ring", "--network", "shaped", "--bandwidth", "fast"],
     "invalid bandwidth 'fast'"),
    (["run", "all_reduce.ring", "--network", "shaped", "--bandwidth", "1gbit,1gbit",
      "--world", "3"], "2 bandwidths (1gbit,1gbit) for 3 ranks"),
    (["compare", "all_reduce.ring", "--network", "wifi"], "invalid --network 'wifi'"),
    (["calibrate", "--bandwidth", "1gbit"], "--bandwidth needs --network shaped"),
    (["calibrate", "--network", "shaped", "--bandwidth", "0mbit"], "choose between"),
    (["run", "all_reduce.ring", "--network", "shaped", "--backend", "nccl"], "gloo"),
]


@pytest.mark.parametrize(("argv", "message"), BAD)
def test_bad_network_options_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_machine_without_root_or_iproute2_is_told_what_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(shaped, "missing",
                        lambda: "the shaped network needs root (…); running as uid 1000")
    assert main(["run", "broadcast.binomial", "--network", "shaped", "--world", "2"]) == 2
    err = capsys.readouterr().err
    assert "cannot use --network shaped: the shaped network needs root" in err
    assert err.count("\n") == 1


def test_files_from_before_networks_still_load(tmp_path):
    path = tmp_path / "cal.json"
    old = {"schema": 1, "entries": {"h/gloo/2": {
        "host": "h", "backend": "gloo", "world_size": 2, "latency_s": 1e-5,
        "bandwidth_Bps": 1e9, "reduce_Bps": 1e9, "memcpy_Bps": 1e9, "flops_per_s": 1e9}}}
    path.write_text(json.dumps(old))
    entry = find_entry(2, host="h", path=path)
    assert entry.network == "loopback" and entry.key == "h/gloo/2"
    save_entry(CalibrationEntry("h", "gloo", 2, 1e-4, 1e7, 1e9, 1e9, 1e9,
                                network="shaped:100mbit"), path)
    assert sorted(load_calibration(path)) == ["h/gloo/2", "h/gloo/2/shaped:100mbit"]


def test_simulate_on_a_shaped_calibration_needs_no_root(tmp_path, capsys):
    path = tmp_path / "cal.json"
    save_entry(CalibrationEntry(this_host(), "gloo", 3, 1e-4, 11.9e6, 2e9, 4e9, 1e10,
                                network="shaped:100mbit,100mbit,10mbit"), path)
    argv = ["simulate", "all_reduce.ring", "--world", "3", "--sizes", "1MiB", "--network",
            "shaped", "--bandwidth", "100mbit,100mbit,10mbit", "--calibration", str(path),
            "--json"]
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)["records"]
    # the 10 Mbit/s rank sets the pace: at least 2·(p−1)/p·n over its η·10 Mbit/s port
    assert row["predicted_s"] > 2 * 2 / 3 * 2**20 / 1.19e6


@pytest.mark.skipif(shaped.missing() is not None, reason=shaped.missing() or "")
def test_run_on_the_shaped_network(capsys):
    argv = ["run", "broadcast.binomial", "--network", "shaped", "--bandwidth", "100mbit",
            "--world", "2", "--sizes", "1MiB", "--repeats", "2", "--json"]
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)["records"]
    # 1 MiB over a 100 Mbit/s link is at least 84 ms of line rate
    assert row["measured_median_s"] > 0.08
    assert not [n for n in shaped.lab_namespaces()
                if n.startswith(f"{shaped.PREFIX}{os.getpid()}-")]
