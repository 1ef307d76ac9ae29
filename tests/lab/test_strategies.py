"""Strategy twins behind the common commands: ``list`` shows them by chapter, ``compare`` runs
each at world 2 with the agreed record fields, and ``simulate``/``run`` point to ``compare``."""

import json

import pytest

from lab.cli import main
from lab.strategies import FIELDS, all_strategies, get_strategy
from lab.strategy_cli import in_chapter

NAMES = [t.name for t in all_strategies()]


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """A quick calibration of this machine at world 2, in a file of the test's own."""
    from lab.calibrate import QUICK_SIZES, calibrate

    path = tmp_path_factory.mktemp("strategies") / "calibration.json"
    calibrate(2, "gloo", sizes=QUICK_SIZES, repeats=5, path=path)
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


@pytest.mark.parametrize("name", NAMES)
def test_compare_runs_each_strategy_twin_at_world_2(name, calibration, capsys, tmp_path):
    out = tmp_path / "out"
    assert main(["compare", name, "--quick", "--world", "2", "--repeats", "3", "--json",
                 "--out", str(out), "--calibration", str(calibration)]) == 0
    records = json.loads(capsys.readouterr().out)["records"]
    twin = get_strategy(name)
    assert records  # every quick sweep has a point at world 2 (some have one per world)
    for r in records:
        assert set(FIELDS) <= set(r)
        assert r["twin"] == name and r["world"] == 2
        assert list(r["point"]) == [twin.parameter]
        assert r["point"][twin.parameter] in twin.quick_points
        assert r["predicted_s"] > 0
        assert r["measured_p10_s"] <= r["measured_median_s"] <= r["measured_p90_s"]
        assert r["rel_error"] == pytest.approx(
            (r["predicted_s"] - r["measured_median_s"]) / r["measured_median_s"])
        if twin.memory:  # ZeRO: the model states a rank holds, predicted and counted
            assert r["predicted_model_state_bytes"] == r["measured_model_state_bytes"] > 0
    assert {p.name for p in out.iterdir()} == {f"{name}.csv", f"{name}.json"}


@pytest.mark.parametrize("argv, says", [
    (["simulate", "zero.2"], "'distml-lab compare zero.2'"),
    (["run", "zero.3"], "strategy twin"),
    (["compare", "zero.1", "--sizes", "1KiB"], "sweeps hidden"),
    (["compare", "zero.1", "--world", "8"], "from 2 to 4 ranks"),
    (["compare", "data_parallel", "--backend", "nccl"], "CUDA GPU"),
    (["list", "--chapter", "five"], "a chapter number"),
])
def test_a_strategy_twin_outside_its_range_is_one_line(argv, says, capsys, no_work):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
