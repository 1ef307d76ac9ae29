"""``distml-lab plan`` and ``simulate MODEL`` at cluster scale: oversized requests are refused
in one line before any work, the screened search ranks exactly what simulating every
configuration one by one ranks, and ``--json`` keeps stderr silent."""

import json
import math

import pytest

from lab.cli import main
from simulator.core.hardware import preset
from simulator.megatron_plan import configurations, plan, screen
from simulator.tensor_parallel import chunks, memory_per_stage, simulate_megatron
from simulator.transformer import GPT

SMALL = GPT(name="small", layers=8, hidden=512, heads=8, seq=256, vocab=1000)


@pytest.mark.parametrize(("argv", "words"), [
    (["plan", "--model", "gpt3-175b", "--gpus", "1000000", "--cluster", "h100"],
     ["at most 65536 GPUs", "smaller --gpus"]),
    (["plan", "--model", "gpt3-175b", "--gpus", "3072", "--cluster", "h100", "--budget-s", "1"],
     ["over --budget-s 1", "smaller --gpus"]),
    (["simulate", "zero", "--params", "175B", "--stage", "3", "--dp", "1000000", "--cluster",
      "h100"], ["at most 1024 ranks", "drop --cluster"]),
    (["simulate", "horovod", "--world", "1024", "--cluster", "h100"],
     ["over --budget-s 60", "smaller --world"]),
    (["simulate", "megatron", "--model", "gpt3-175b", "--tp", "8", "--pp", "16", "--dp", "1",
      "--global-batch", "8192", "--micro-batch", "1", "--cluster", "h100", "--budget-s", "1"],
     ["over --budget-s 1", "larger micro-batches"]),
])
def test_oversized_work_is_refused_in_one_line_before_it_starts(argv, words, capsys, tmp_path,
                                                                monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert all(w in err for w in words), err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_closed_form_zero_takes_a_million_ranks(capsys):
    assert main(["simulate", "zero", "--params", "175B", "--stage", "3", "--dp", "1000000",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_states"]["total"] > 0


def _one_by_one(model, cluster, batch):
    """The ranking the slow way: every configuration's memory and simulation on its own."""
    device, rows = cluster.devices[0], []
    for config in configurations(model, cluster.world_size, batch):
        parts = chunks(config, device.flops_per_s)
        memory = max(m["total"] for m in memory_per_stage(config, parts))
        if memory <= device.memory_bytes:
            r = simulate_megatron(cluster, config)
            g = config.grid
            rows.append((g.t, g.p, g.d, config.micro_batch, r.iteration_time_s))
    return sorted(rows, key=lambda r: (r[4], r[0], r[1], r[3]))


@pytest.mark.parametrize(("model", "gpus", "batch"), [(SMALL, 16, 32), (SMALL, 64, 64)])
def test_screened_plan_ranks_what_simulating_one_by_one_ranks(model, gpus, batch):
    cluster = preset("h100", gpus)
    screened = screen(model, cluster.devices[0], gpus, batch)
    seen = []
    rows = plan(model, cluster, batch, screened=screened, simulated=seen.append)
    ranked = [(c.t, c.p, c.d, c.micro_batch, c.iteration_time_s) for c in rows if c.fits]
    expected = _one_by_one(model, cluster, batch)
    assert [r[:4] for r in ranked] == [r[:4] for r in expected]
    assert all(math.isclose(a[4], b[4], rel_tol=1e-12)
               for a, b in zip(ranked, expected, strict=True))
    assert len(seen) == len(ranked) == sum(s.fits for s in screened)


def test_plan_json_keeps_stderr_silent(capsys):
    assert main(["plan", "--layers", "8", "--hidden", "512", "--heads", "8", "--seq", "256",
                 "--vocab", "1000", "--gpus", "16", "--cluster", "h100", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["ranked"] and err == ""


def test_simulate_model_json_keeps_stderr_silent(capsys):
    assert main(["simulate", "zero", "--params", "1B", "--stage", "2", "--dp", "64",
                 "--cluster", "h100", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "communication_time_s" in json.loads(out) and err == ""


@pytest.mark.parametrize(("json_", "progress", "estimate_s", "shown"), [
    (False, False, 5.0, True), (False, False, 0.5, False), (True, False, 5.0, False),
    (True, True, 5.0, True)])
def test_a_bar_shows_for_long_work_and_with_json_only_when_asked(json_, progress, estimate_s,
                                                                 shown):
    from argparse import Namespace

    from lab.budget import show_progress

    assert show_progress(Namespace(json=json_, progress=progress), estimate_s) is shown
