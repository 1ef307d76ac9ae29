"""``distml-lab simulate MODEL``: whole-configuration simulators on the command line."""

import json

import pytest

from lab.cli import main


def test_simulate_zero_json_has_the_agreed_fields(capsys):
    assert main(["simulate", "zero", "--params", "7.5B", "--stage", "2", "--dp", "64",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model_state_bytes_per_device"] == doc["model_states"]["total"]
    assert doc["model_states"]["parameters"] == 2 * 7_500_000_000
    assert doc["communication_bytes_per_step"] > 0


def test_simulate_zero_on_a_preset_times_each_collective(capsys):
    assert main(["simulate", "zero", "--params", "1B", "--stage", "3", "--dp", "16",
                 "--cluster", "a100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["kind"] for c in doc["collectives"]] == ["all_gather", "all_gather",
                                                       "reduce_scatter"]
    assert doc["communication_time_s"] == pytest.approx(
        sum(c["time_s"] for c in doc["collectives"]))


def test_simulate_zero_prints_a_table(capsys):
    assert main(["simulate", "zero", "--params", "1e9", "--stage", "1", "--dp", "8"]) == 0
    assert "optimizer state" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--params", "lots", "--stage", "1", "--dp", "4"], "invalid --params 'lots'"),
    (["--params", "1B", "--stage", "4", "--dp", "4"], "invalid choice: 4"),
    (["--params", "1B", "--stage", "1", "--dp", "0"], "invalid --dp 0"),
    (["--params", "1B", "--stage", "1", "--dp", "12", "--cluster", "a100"], "whole 8-GPU"),
    (["--params", "1B", "--stage", "1", "--dp", "4", "--cluster", "tpu"], "unknown cluster"),
    (["--stage", "1", "--dp", "4"], "--params"),
])
def test_simulate_zero_bad_input_is_one_line(argv, message, capsys):
    assert main(["simulate", "zero", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
