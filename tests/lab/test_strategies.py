"""Strategy twins behind the common commands: ``list`` shows them by chapter; ``compare`` runs
each at world 2 in both model tiers with the agreed record fields; ``simulate`` predicts each
from the calibration alone, ``run`` measures without one; bad requests are one line."""

import json

import pytest

from lab.cli import main
from lab.strategies import FIELDS, all_strategies, get_strategy
from lab.strategy_cli import in_chapter

NAMES = [t.name for t in all_strategies()]

RUN_NAMES = ["data_parallel", "zero.1", "rpc.split"]
"""Cheap twins whose ``run`` is checked on its own."""


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """A quick calibration of this machine at worlds 2 and 4 (a parameter server's 1 + 1 + 2
    processes), in a file of the test's own."""
    from lab.calibrate import QUICK_SIZES, calibrate

    path = tmp_path_factory.mktemp("strategies") / "calibration.json"
    for world in (2, 4):
        calibrate(world, "gloo", sizes=QUICK_SIZES, repeats=5, path=path)
    return path


def test_list_shows_the_strategies_by_chapter(capsys):
    assert main(["list", "--chapter", "14", "--json"]) == 0
    twins = json.loads(capsys.readouterr().out)["twins"]
    assert [t["name"] for t in twins] == ["zero.1", "zero.2", "zero.3"]
    assert all(t["kind"] == "strategy" and t["parameter"] == "hidden" for t in twins)
    assert main(["list", "--chapter", "2", "--json"]) == 0
    names = {t["name"] for t in json.loads(capsys.readouterr().out)["twins"]}
    assert "all_reduce.ring" in names and "zero.1" not in names


@pytest.mark.parametrize("chapter, wanted, inside", [("14", "14", True), ("1-2", "2", True),
                                                     ("1-2", "3", False), ("4", "14", False)])
def test_a_chapter_range_includes_its_chapters(chapter, wanted, inside):
    assert in_chapter(chapter, wanted) is inside


def _points_of(name, records):
    """Every record is of twin ``name`` at world 2, at one of its quick points."""
    twin = get_strategy(name)
    assert records  # every quick sweep has a point at world 2
    for r in records:
        assert r["twin"] == name and r["world"] == 2
        assert list(r["point"]) == [twin.parameter]
        assert r["point"][twin.parameter] in twin.quick_points
    return twin


@pytest.mark.parametrize("name", NAMES)
def test_compare_runs_each_strategy_twin_at_world_2_in_both_tiers(name, calibration, capsys,
                                                                  tmp_path):
    out = tmp_path / "out"
    assert main(["compare", name, "--quick", "--world", "2", "--repeats", "3", "--json",
                 "--model", "both", "--out", str(out), "--calibration", str(calibration)]) == 0
    records = json.loads(capsys.readouterr().out)["records"]
    twin = _points_of(name, records)
    for r in records:
        assert set(FIELDS) <= set(r) and r["model"] == "both"
        assert r["measured_p10_s"] <= r["measured_median_s"] <= r["measured_p90_s"]
        median = r["measured_median_s"]
        for tier in ("textbook", "host"):
            assert r[f"predicted_{tier}_s"] > 0
            assert r[f"rel_error_{tier}"] == pytest.approx(
                (r[f"predicted_{tier}_s"] - median) / median)
        assert r["predicted_s"] == r["predicted_host_s"]
        assert r["rel_error"] == pytest.approx(r["rel_error_host"])
        if twin.memory:  # ZeRO: the model states a rank holds, predicted and counted
            assert r["predicted_model_state_bytes"] == r["measured_model_state_bytes"] > 0
            # and its peak over a step (how close: tests/lab/test_zero_twin.py)
            assert r["predicted_peak_bytes"] > r["predicted_model_state_bytes"]
            assert r["measured_peak_bytes"] > r["measured_model_state_bytes"]
            assert r["rel_error_peak"] == pytest.approx(
                (r["predicted_peak_bytes"] - r["measured_peak_bytes"]) / r["measured_peak_bytes"])
    assert {p.name for p in out.iterdir()} == {f"{name}.csv", f"{name}.json"}


def simulate(argv):
    """``distml-lab simulate …`` of a strategy twin, through :func:`lab.cli.main` — which also
    routes ``horovod`` and ``megatron``, names of whole-configuration simulators, to the twin
    given ``--quick`` or a tier (:func:`lab.strategy_cli.strategy_request`)."""
    return main(argv)


@pytest.mark.parametrize("rest, twin", [
    (["--quick", "--model", "both"], True), (["--world", "2", "--quick", "--json"], True),
    (["--model=host", "--calibration", "c.json"], True), (["--json"], False), ([], False),
    (["--world", "2"], False), (["--world", "2", "--calibration", "c.json"], False),
    (["--model", "gpt3-175b", "--tp", "8"], False), (["--world", "2", "--cluster", "a100"], False),
])
def test_horovod_and_megatron_reach_the_twin_only_with_the_common_flags(rest, twin):
    from lab.strategy_cli import strategy_request

    assert strategy_request(rest) is twin


@pytest.mark.parametrize("name", NAMES)
def test_simulate_predicts_each_strategy_twin_in_both_tiers(name, calibration, capsys):
    assert simulate(["simulate", name, "--quick", "--model", "both", "--json",
                     "--calibration", str(calibration)]) == 0
    records = json.loads(capsys.readouterr().out)["records"]
    _points_of(name, records)
    for r in records:
        assert r["predicted_textbook_s"] > 0 and r["predicted_host_s"] > 0
        assert r["predicted_s"] == r["predicted_host_s"]
        assert not any(k.startswith("measured") for k in r)


@pytest.mark.parametrize("name", RUN_NAMES)
def test_run_measures_a_strategy_twin_without_a_calibration(name, capsys, monkeypatch,
                                                            tmp_path):
    monkeypatch.setenv("DISTML_CALIBRATION", str(tmp_path / "none.json"))
    assert main(["run", name, "--quick", "--repeats", "2", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)["records"]
    _points_of(name, records)
    for r in records:
        assert 0 < r["measured_p10_s"] <= r["measured_median_s"] <= r["measured_p90_s"]
        assert r["bytes"] > 0
        assert not any(k.startswith("predicted") for k in r)
    assert not (tmp_path / "none.json").exists()


@pytest.mark.parametrize("argv, says", [
    (["simulate", "zero.2", "--sizes", "1KiB"], "sweeps hidden"),
    (["simulate", "zero.1", "--cluster", "a100"], "drop --cluster"),
    (["simulate", "ddp", "--calibration", "{tmp}/none.json"], "'distml-lab calibrate --world 2"),
    (["run", "zero.3", "--sizes", "1KiB"], "sweeps hidden"),
    (["run", "zero.3", "--network", "shaped"], "loopback"),
    (["compare", "zero.1", "--sizes", "1KiB"], "sweeps hidden"),
    (["compare", "zero.1", "--world", "8"], "from 2 to 4 ranks"),
    (["compare", "data_parallel", "--backend", "nccl"], "CUDA GPU"),
    (["list", "--chapter", "five"], "a chapter number"),
])
def test_a_strategy_twin_outside_its_range_is_one_line(argv, says, capsys, no_work, tmp_path):
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
