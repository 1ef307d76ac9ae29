"""``distml-lab simulate megatron`` and ``distml-lab plan`` (chapter 12)."""

import json

import pytest

from lab.cli import main

GPT3 = ["--model", "gpt3-175b", "--tp", "8", "--pp", "16", "--dp", "8", "--global-batch",
        "1536", "--micro-batch", "1", "--cluster", "a100"]
SHAPE = ["--layers", "8", "--hidden", "512", "--heads", "8", "--seq", "256", "--vocab",
         "1000"]


def test_simulate_megatron_json_has_the_agreed_fields(capsys):
    assert main(["simulate", "megatron", *GPT3, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["params"] == pytest.approx(175e9, rel=0.005)
    assert doc["gpus"] == 1024 and doc["microbatches"] == 192
    assert doc["iteration_time_s"] > 0 and 0 < doc["tflops_per_gpu"] <= 312
    assert 0 < doc["bubble_fraction"] < 1
    parts = doc["memory"]
    assert set(parts) == {"parameters", "gradients", "optimizer_state", "activations"}
    assert doc["memory_per_gpu_bytes"] == pytest.approx(sum(parts.values()))
    assert doc["fits"] is True


def test_simulate_megatron_from_a_shape_with_every_option(capsys):
    argv = ["simulate", "megatron", *SHAPE, "--tp", "2", "--pp", "2", "--dp", "2",
            "--global-batch", "16", "--micro-batch", "2", "--cluster", "h100",
            "--recompute", "selective", "--sequence-parallel", "--interleave", "2",
            "--overlap-grad-reduce", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["tp"], doc["pp"], doc["dp"], doc["interleave"]) == (2, 2, 2, 2)
    assert doc["recompute"] == "selective" and doc["sequence_parallel"]
    assert "H100" in doc["cluster"]


def test_simulate_megatron_prints_a_table(capsys):
    assert main(["simulate", "megatron", *SHAPE, "--tp", "1", "--pp", "1", "--dp", "8",
                 "--global-batch", "8", "--micro-batch", "1", "--cluster", "a100"]) == 0
    out = capsys.readouterr().out
    assert "optimizer state" in out and "TFLOP/s" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--tp", "8", "--pp", "16", "--dp", "8", "--global-batch", "1536", "--micro-batch", "1",
      "--cluster", "a100"], "--model NAME or the model's shape"),
    ([*GPT3[:-1], "tpu"], "invalid --cluster 'tpu'"),
    (["--model", "gpt-5", *GPT3[2:]], "unknown model 'gpt-5'"),
    ([*GPT3[:5], "7", *GPT3[6:]], "96 layers do not split into 7 stages"),
    ([*GPT3[:2], "--tp", "0", *GPT3[4:]], "invalid --tp 0"),
    ([*GPT3, "--recompute", "half"], "invalid choice"),
    ([*GPT3, "--interleave", "5"], "do not split"),
    ([*GPT3[:9], "1001", *GPT3[10:]], "global batch 1001"),
    ([*SHAPE[:2], "--hidden", "100", *SHAPE[4:], *GPT3[2:]], "invalid model"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, capsys):
    assert main(["simulate", "megatron", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_plan_ranks_configurations_and_lists_what_does_not_fit(capsys):
    assert main(["plan", "--model", "gpt-7.5b", "--gpus", "32", "--cluster", "a100",
                 "--global-batch", "64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ranked, skipped = doc["ranked"], doc["skipped_out_of_memory"]
    assert ranked and skipped and doc["tried"] == len(ranked) + len(skipped)
    speeds = [r["samples_per_s"] for r in ranked]
    assert speeds == sorted(speeds, reverse=True)
    assert all(r["memory_per_gpu_bytes"] > 80 * 2**30 for r in skipped)
    assert {(r["tp"], r["pp"]) for r in skipped} >= {(1, 1)}


def test_plan_prints_a_table(capsys):
    assert main(["plan", *SHAPE, "--gpus", "16", "--cluster", "a100", "--top", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "configurations fit" in lines[0] and len(lines) == 2 + 3


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "gpt3-175b", "--gpus", "8", "--cluster", "a100"], "no configuration"),
    (["--model", "gpt3-175b", "--gpus", "12", "--cluster", "a100"], "whole 8-GPU nodes"),
    (["--model", "gpt3-175b", "--gpus", "0", "--cluster", "a100"], "invalid --gpus 0"),
    (["--model", "gpt3-175b", "--gpus", "8", "--cluster", "a100", "--interleave", "x"],
     "invalid --interleave"),
    (["--gpus", "8", "--cluster", "a100"], "--model NAME"),
])
def test_plan_bad_input_is_one_line_and_exit_status_2(argv, message, capsys):
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
