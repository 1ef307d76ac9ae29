"""``distml-lab simulate --engine``: auto takes an exact fast path and says so; what no engine
can take is refused in one line with exit status 2, naming the limit or the way out."""

import json

import pytest

from lab.checks import MAX_FAST_RANKS, MAX_SIMULATED_RANKS
from lab.cli import main


def _refused(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def _records(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)["records"]


def test_engine_fast_on_a_twin_without_one_names_the_twins_with_one(capsys):
    err = _refused(capsys, ["simulate", "all_reduce.rabenseifner", "--cluster", "a100",
                            "--world", "8", "--sizes", "1MiB", "--engine", "fast"])
    assert "all_reduce.rabenseifner has no exact fast path" in err
    assert "all_reduce.ring" in err and "all_reduce.recursive_doubling" in err


def test_a_world_above_the_fast_limit_is_refused_with_the_limit(capsys):
    err = _refused(capsys, ["simulate", "all_reduce.ring", "--cluster", "a100",
                            "--world", "100000", "--sizes", "64MiB"])
    assert f"at most {MAX_FAST_RANKS} ranks" in err


def test_events_above_their_limit_point_to_the_fast_path(capsys):
    err = _refused(capsys, ["simulate", "all_reduce.ring", "--cluster", "a100", "--world",
                            str(MAX_SIMULATED_RANKS + 8), "--sizes", "1MiB",
                            "--engine", "events"])
    assert f"at most {MAX_SIMULATED_RANKS} ranks" in err and "--engine auto" in err


def test_a_twin_without_a_fast_path_keeps_the_event_limit(capsys):
    err = _refused(capsys, ["simulate", "all_reduce.rabenseifner", "--cluster", "a100",
                            "--world", str(MAX_SIMULATED_RANKS + 8), "--sizes", "1MiB"])
    assert f"at most {MAX_SIMULATED_RANKS} ranks" in err and "--engine" not in err


def test_engine_fast_where_the_cluster_does_not_allow_it_is_refused(capsys):
    # 12 ranks: recursive doubling folds, which its fast path does not replay
    err = _refused(capsys, ["simulate", "all_reduce.recursive_doubling", "--cluster",
                            "ethernet-10g", "--world", "12", "--sizes", "1MiB",
                            "--engine", "fast"])
    assert "no exact fast path on cluster ethernet-10g at 12 ranks" in err


def test_auto_above_the_event_limit_without_an_exact_path_is_refused(capsys):
    world = str(MAX_SIMULATED_RANKS + 8)  # not a power of two
    err = _refused(capsys, ["simulate", "all_reduce.recursive_doubling", "--cluster", "a100",
                            "--world", world, "--sizes", "1MiB"])
    assert f"at most {MAX_SIMULATED_RANKS} ranks" in err


@pytest.mark.parametrize("twin", ["all_reduce.ring", "all_reduce.recursive_doubling"])
def test_auto_takes_the_fast_path_and_equals_the_events(capsys, twin):
    argv = ["simulate", twin, "--cluster", "a100", "--world", "8,16",
            "--sizes", "1000,1MiB", "--json"]
    auto = _records(capsys, argv)
    events = _records(capsys, [*argv, "--engine", "events"])
    assert [r["engine"] for r in auto] == ["fast"] * 4
    assert [r["engine"] for r in events] == ["events"] * 4
    for a, e in zip(auto, events, strict=True):
        assert (a["world"], a["bytes"]) == (e["world"], e["bytes"])
        assert a["predicted_s"] == pytest.approx(e["predicted_s"], rel=1e-9)


def test_json_is_silent_on_stderr_unless_progress_is_asked(capsys):
    argv = ["simulate", "all_reduce.ring", "--cluster", "a100", "--world", "8",
            "--sizes", "1MiB", "--json"]
    assert main(argv) == 0
    assert capsys.readouterr().err == ""
    assert main([*argv, "--progress"]) == 0
    assert "simulate all_reduce.ring" in capsys.readouterr().err
