"""``distml-lab simulate megatron`` and ``plan`` with --cp, --ep, --fsdp and MoE presets."""

import json

import pytest

from lab.cli import main

MIXTRAL = ["--model", "mixtral-8x7b", "--tp", "2", "--pp", "2", "--dp", "4",
           "--global-batch", "16", "--micro-batch", "1", "--cluster", "h100"]


def test_simulate_megatron_runs_a_moe_preset_with_ep_cp_and_fsdp(capsys):
    assert main(["simulate", "megatron", *MIXTRAL, "--ep", "4", "--cp", "2", "--fsdp",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["cp"], doc["ep"], doc["fsdp"], doc["gpus"]) == (2, 4, True, 32)
    assert doc["params"] == pytest.approx(46.7e9, rel=0.02)
    assert doc["iteration_time_s"] > 0 and doc["fits"]


def test_experts_and_top_k_override_the_preset(capsys):
    assert main(["simulate", "megatron", *MIXTRAL, "--experts", "16", "--top-k", "1",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["active_params"] < 12.9e9 < doc["params"] / 2


def test_simulate_megatron_table_names_the_grid(capsys):
    assert main(["simulate", "megatron", *MIXTRAL, "--ep", "2"]) == 0
    assert "ep 2" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "message"), [
    (["--ep", "3"], "ep = 3 does not divide d·cp = 4"),
    (["--ep", "0"], "invalid --ep 0"),
    (["--cp", "3"], "does not split over cp = 3"),
    (["--experts", "6", "--ep", "4"], "6 experts do not shard over ep = 4"),
    (["--top-k", "9"], "top-k 9 must be between 1 and the 8 experts"),
    (["--sequence-parallel"], "--sequence-parallel with --cp or experts"),
])
def test_bad_combinations_are_one_line_and_exit_status_2(extra, message, capsys):
    assert main(["simulate", "megatron", *MIXTRAL, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_experts_need_a_moe_model(capsys):
    argv = ["simulate", "megatron", "--model", "gpt-1.7b", *MIXTRAL[2:], "--experts", "8"]
    assert main(argv) == 2
    assert "need a mixture-of-experts --model" in capsys.readouterr().err


def test_plan_searches_cp_ep_and_fsdp_and_shows_them(capsys):
    argv = ["plan", "--model", "mixtral-8x7b", "--gpus", "16", "--cluster", "h100",
            "--global-batch", "16", "--max-tp", "2", "--cp", "1,2", "--fsdp", "both",
            "--json"]
    assert main(argv) == 0
    ranked = json.loads(capsys.readouterr().out)["ranked"]
    seen = {(r["cp"], r["ep"], r["fsdp"]) for r in ranked}
    assert {c for c, _, _ in seen} == {1, 2} and {z for _, _, z in seen} == {False, True}
    assert {e for _, e, _ in seen} >= {1, 2, 8}
    assert main([*argv[:-1], "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "cp" in lines[1] and "fsdp" in lines[1] and len(lines) == 4


def test_plan_refuses_a_bad_cp_list(capsys):
    assert main(["plan", "--model", "mixtral-8x7b", "--gpus", "16", "--cluster", "h100",
                 "--cp", "x"]) == 2
    assert "invalid --cp x" in capsys.readouterr().err
