"""benchmarks/versus_pytorch.py: one cheap system in --quick mode writes records that carry
both timings and their ratio (nothing about speed is asserted)."""

import csv
import json
import sys

import pytest

TIMINGS = [f"{who}_{stat}" for who in ("ours", "pytorch") for stat in ("median_s", "p10_s",
                                                                        "p90_s")]


def test_quick_megatron_run_writes_both_timings_and_the_ratio(load, tmp_path, monkeypatch):
    module = load("versus_pytorch")
    monkeypatch.setattr(sys, "argv", [module.__file__, "--quick", "--systems", "megatron",
                                      "--worlds", "2", "--repeats", "2", "--runs", "2",
                                      "--out", str(tmp_path)])
    module.main()
    run_id = load("_output").RUN_ID
    doc = json.loads((tmp_path / f"versus_pytorch-{run_id}.json").read_text())
    records = doc["records"]
    assert [(r["system"], r["world"], r["run"]) for r in records] == [
        ("megatron", 2, 0), ("megatron", 2, 1)]
    for r in records:
        assert r["reference"].startswith("DTensor")
        assert all(r[k] > 0 for k in TIMINGS)
        assert r["ratio"] == pytest.approx(r["ours_median_s"] / r["pytorch_median_s"])
    [summary] = doc["summary"]
    assert summary["runs"] == 2
    assert summary["min_ratio"] <= summary["median_ratio"] <= summary["max_ratio"]
    with (tmp_path / f"versus_pytorch-{run_id}.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 and set(TIMINGS) | {"system", "workload", "ratio"} <= set(rows[0])


def test_an_unknown_system_is_one_line_and_exit_status_2(load, tmp_path, monkeypatch, capsys):
    module = load("versus_pytorch")
    monkeypatch.setattr(sys, "argv", [module.__file__, "--systems", "zero",
                                      "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_:
        module.main()
    assert exit_.value.code == 2
    assert "unknown system(s) zero" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
