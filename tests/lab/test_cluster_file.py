"""A cluster file: ``calibrate --cluster-out`` measures this cluster's primitives and writes
the textbook model of it, which every ``--cluster`` takes back; bad files are one line."""

import json

import pytest

from lab.cli import main
from simulator.core.cluster_file import FORMAT, ClusterFile, load, resolve, save
from simulator.core.hardware import Device
from simulator.core.network import Link


@pytest.mark.slow
def test_calibrate_writes_a_cluster_file_that_simulate_and_plan_read(tmp_path, capsys):
    path = tmp_path / "cluster.json"
    assert main(["calibrate", "--world", "2", "--quick", "--cluster-out", str(path)]) == 0
    doc = json.loads(path.read_text())
    assert doc["format"] == FORMAT and doc["ranks_per_node"] == 2 and doc["inter"] is None
    measured = doc["measured"]
    # the device's rate is the best GEMM measured, its bandwidth the measured copy
    assert doc["device"]["flops_per_s"] == max(g["flops_per_s"] for g in measured["gemm"])
    assert doc["device"]["mem_bandwidth_Bps"] == measured["copy_Bps"]
    assert len(measured["intra_one_way_s"]) == len(measured["p2p_sizes"])
    capsys.readouterr()
    assert main(["simulate", "all_reduce.ring", "--cluster", str(path), "--world", "2",
                 "--sizes", "1MiB", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["records"]
    link = load(path).intra  # the ring on two ranks: 2 steps of α + n/2·β, and one reduction
    assert row["predicted_s"] >= 2 * (link.latency_s + 2**19 / link.bandwidth_Bps)
    assert main(["calibrate", "--world", "2", "--quick", "--cluster-out", str(path)]) == 2
    assert "exists" in capsys.readouterr().err  # never overwritten


def test_a_cluster_file_round_trips_and_spans_nodes(tmp_path):
    cluster = ClusterFile("lab", Device("gpu", 1e14, 1e12, 8e10), Link(2e-6, 2e11),
                          Link(5e-6, 2.5e10), 4, {"note": "made up for the test"})
    path = save(cluster, tmp_path / "c.json")
    assert load(path) == cluster
    one_node, two_nodes = resolve(str(path), 4), resolve(str(path), 8)
    assert one_node.world_size == 4 and two_nodes.world_size == 8
    assert len(two_nodes.topology.links) > len(one_node.topology.links)  # a fabric level
    with pytest.raises(ValueError, match="whole nodes"):
        resolve(str(path), 6)


@pytest.mark.parametrize("doc, words", [
    ({"format": "other"}, "not a distml-cluster/1 file"),
    ({"format": FORMAT, "device": {"flops_per_s": -1}}, "flops_per_s must be a positive"),
    ({"format": FORMAT, "ranks_per_node": 2, "intra": {"latency_s": 1e-6, "bandwidth_Bps": 1e9},
      "device": {"flops_per_s": 1e9, "mem_bandwidth_Bps": 1e9, "memory_bytes": "lots"}},
     "memory_bytes must be a positive"),
])
def test_a_bad_cluster_file_is_one_line_before_any_work(doc, words, tmp_path, capsys, no_work):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    assert main(["simulate", "all_reduce.ring", "--cluster", str(path), "--sizes", "1MiB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and str(path) in err
