"""Several machines, proven on one: two ``torchrun`` agents as two nodes (``--nnodes 2``, c10d
rendezvous) run a twin's measurement with ``python -m lab.run``, calibrate the same world, and
``distml-lab compare --measured`` puts the prediction for that cluster beside it."""

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.shaped import lab_namespaces, missing
from backends.tf_distribute.ps_ranks import deal_roles
from lab.cli import main
from tests.lab.torchrun_nodes import run_nodes


@pytest.mark.slow
def test_two_agents_measure_a_collective_and_compare_predicts_their_cluster(tmp_path, capsys):
    out = tmp_path / "measured"
    agents = run_nodes(2, 1, ["lab.run", "all_reduce.ring", "--sizes", "64KiB,1MiB",
                              "--repeats", "5", "--calibrate", "--quick-calibration",
                              "--out", str(out)], timeout_s=240)
    assert all(a.returncode == 0 for a in agents), [a.stderr[-1500:] for a in agents]
    doc = json.loads((out / "all_reduce.ring.json").read_text())
    assert doc["cluster"]["nodes"] == 2 and doc["cluster"]["world"] == 2
    assert sorted(r["node"] for r in doc["cluster"]["ranks"]) == [0, 1]
    assert [r["bytes"] for r in doc["records"]] == [65536, 1048576]
    assert (out / "calibration.json").exists()
    assert main(["compare", "all_reduce.ring", "--measured", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["records"]
    assert [r["bytes"] for r in rows] == [65536, 1048576]
    for row, measured in zip(rows, doc["records"], strict=True):
        assert row["measured_median_s"] == measured["measured_median_s"]
        assert row["predicted_s"] > 0
        assert row["rel_error"] == pytest.approx(
            (row["predicted_s"] - row["measured_median_s"]) / row["measured_median_s"])


@pytest.mark.slow
def test_a_strategy_twin_runs_on_two_agents(tmp_path, capsys):
    out = tmp_path / "measured"
    agents = run_nodes(2, 1, ["lab.run", "ddp", "--quick", "--repeats", "3", "--out",
                              str(out)], timeout_s=240)
    assert all(a.returncode == 0 for a in agents), [a.stderr[-1500:] for a in agents]
    records = json.loads((out / "ddp.json").read_text())["records"]
    assert records and all(r["world"] == 2 and r["measured_median_s"] > 0 for r in records)


@pytest.mark.slow
def test_tf_parameter_server_deals_its_tasks_over_two_agents(tmp_path):
    out = tmp_path / "measured"
    agents = run_nodes(2, 2, ["lab.run", "tf.parameter_server", "--quick", "--repeats", "2",
                              "--out", str(out)], timeout_s=240)
    assert all(a.returncode == 0 for a in agents), [a.stderr[-1500:] for a in agents]
    doc = json.loads((out / "tf.parameter_server.json").read_text())
    assert doc["launches_on_ranks"] == 1  # one cluster of torchrun's ranks, not one per rank
    (record,) = doc["records"]
    assert record["world"] == 1 and record["measured_median_s"] > 0  # 4 ranks: 1 + 2 ps + 1
    assert record["closures_per_worker"] == [2 * 16]  # every closure ran, on the one worker
    node_of = {r["rank"]: r["node"] for r in doc["cluster"]["ranks"]}  # torchrun's GROUP_RANK
    by_job: dict[str, list[dict]] = {}
    for task in record["tasks"]:  # "/job:ps/replica:0/task:1" → "job:ps"
        assert node_of[task["rank"]] == task["node"]
        by_job.setdefault(task["task"].split("/")[1], []).append(task)
    assert [t["rank"] for t in by_job["job:chief"]] == [0]
    assert sorted(t["node"] for t in by_job["job:ps"]) == [0, 1]  # shards on both machines
    assert [t["node"] for t in by_job["job:worker"]] == [1]  # away from the chief


@pytest.mark.slow
def test_a_part6_twin_runs_on_two_agents(tmp_path):
    out = tmp_path / "measured"
    agents = run_nodes(2, 1, ["lab.run", "moe", "--quick", "--repeats", "3", "--out",
                              str(out)], timeout_s=240)
    assert all(a.returncode == 0 for a in agents), [a.stderr[-1500:] for a in agents]
    doc = json.loads((out / "moe.json").read_text())
    assert doc["cluster"]["nodes"] == 2 and doc["launches_on_ranks"] >= 1
    assert doc["records"] and all(r["world"] == 2 and r["measured_median_s"] > 0
                                  for r in doc["records"])


def test_parameter_server_roles_are_dealt_as_the_docstring_draws_them():
    assert deal_roles([0, 0, 1, 1], 2) == [("chief", 0), ("ps", 1), ("ps", 0), ("worker", 0)]
    assert deal_roles([0, 0, 0, 1, 1, 1], 2) == [
        ("chief", 0), ("ps", 1), ("worker", 1), ("ps", 0), ("worker", 0), ("worker", 2)]


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3))
def test_parameter_server_roles_cover_every_task_and_spread_the_ps(nodes, per_node, num_ps):
    layout = [n for n in range(nodes) for _ in range(per_node)]
    if len(layout) < 2 + num_ps:
        with pytest.raises(ValueError):
            deal_roles(layout, num_ps)
        return
    roles = deal_roles(layout, num_ps)
    assert roles[0] == ("chief", 0)
    workers = len(layout) - 1 - num_ps
    assert sorted(roles[1:]) == sorted([("ps", i) for i in range(num_ps)]
                                       + [("worker", i) for i in range(workers)])
    with_tasks = len({layout[r] for r in range(1, len(layout))})  # nodes beside the chief's rank
    ps_nodes = {layout[r] for r, (job, _) in enumerate(roles) if job == "ps"}
    assert len(ps_nodes) == min(num_ps, with_tasks)


def test_lab_run_refuses_bad_input_before_joining(tmp_path, monkeypatch, capsys):
    from lab.run import main as run_main

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr("backends.torchrun.attach", lambda *a, **k: pytest.fail("joined"))
    assert run_main(["no_such_twin", "--out", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert run_main(["ps.bsp", "--out", str(tmp_path / "m")]) == 2  # 1+S+W never equals 2
    assert "cannot run on 2 processes" in capsys.readouterr().err
    assert run_main(["tf.mirrored", "--out", str(tmp_path / "m")]) == 2  # one process
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tf.multi_worker_mirrored" in err
    assert run_main(["data_parallel", "--out", str(tmp_path / "m")]) == 2  # one process
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ddp" in err
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "ddp.json").write_text("{}")
    assert run_main(["ddp", "--out", str(tmp_path / "m")]) == 2  # never overwrite
    assert (tmp_path / "m" / "ddp.json").read_text() == "{}"


def test_compare_measured_refuses_a_folder_without_records(tmp_path, capsys):
    assert main(["compare", "ddp", "--measured", str(tmp_path)]) == 2
    assert "no readable ddp.json" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(missing() is not None, reason=f"shaped network unavailable: {missing()}")
def test_two_agents_in_their_own_namespaces_cross_a_real_shaped_link(tmp_path):
    out = tmp_path / "measured"
    agents = run_nodes(2, 1, ["lab.run", "all_reduce.ring", "--sizes", "1MiB", "--repeats",
                              "3", "--out", str(out)], timeout_s=240, shaped="100mbit")
    assert all(a.returncode == 0 for a in agents), [a.stderr[-1500:] for a in agents]
    doc = json.loads((out / "all_reduce.ring.json").read_text())
    assert doc["cluster"]["nodes"] == 2
    # a 2-rank ring all-reduce sends n bytes from each rank ((p-1)/p · n, twice): through a
    # 100 Mbit/s port that cannot take less than n·8/1e8 s — a bound of physics, not a fit
    (record,) = doc["records"]
    assert record["measured_median_s"] >= 2**20 * 8 / 100e6
    assert not [ns for ns in lab_namespaces() if ns.startswith(f"dml{os.getpid()}t-")]
