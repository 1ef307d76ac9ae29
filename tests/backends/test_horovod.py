"""Our Horovod (``backends.horovod``) against ``torch.distributed`` and both DDPs.

One launch of 4 ranks runs every distributed case (:mod:`tests.backends.horovod_ranks`):
all-reduces equal ``dist.all_reduce`` (3 dtypes, Sum/Average, 6 shapes incl. empty and scalar,
worlds 1–4), fusion counts, the response cache, training parity with ``backends.ddp`` and
PyTorch DDP (worlds 1–3, ``backward_passes_per_step`` 1 and 2, three fusion thresholds),
broadcasts, mismatch errors, the timeline, and stalls. Two more launches check the
``horovodrun`` environment contract and a rank that dies; the rest are pure functions.
"""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import backends.horovod as hvd
from backends.horovod.fusion import effective_threshold, fuse_responses
from backends.horovod.messages import ALLREDUCE, Request, Response
from backends.horovod.response_cache import HIT, INVALID, MISS, ResponseCache
from backends.launch import RankError, spawn
from tests.backends.horovod_ranks import CASES, WORLD, die_after_init, run_suite

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def suite():
    per_rank = spawn(run_suite, WORLD, timeout=30, deadline=150)
    return {"failures": [r["failures"] for r in per_rank], "data": [r["data"] for r in per_rank]}


def _by_feature(suite, feature):
    return [f for per_rank in suite["failures"] for f in per_rank.get(feature, [])]


@pytest.mark.parametrize("feature", [name for name, _, _ in CASES if name != "stall"])
def test_distributed_cases(feature, suite):
    mine = _by_feature(suite, feature)
    assert not mine, "\n".join(mine)


def test_stall_warns_and_fails_naming_the_missing_rank(suite):
    assert not _by_feature(suite, "stall"), "\n".join(_by_feature(suite, "stall"))
    ranks = [d["stall/3"] for d in suite["data"][:3]]
    for rank in (0, 2):
        for name in ("lonely", "warmup"):  # uncached, then cached
            message = ranks[rank][name]
            assert f"'allreduce.{name}'" in message and "not by ranks [1]" in message, message
            assert ranks[rank][f"{name}_s"] < 6.0, ranks[rank]
    assert any("stalled tensor 'allreduce.lonely'" in m and "not by ranks [1]" in m
               for m in ranks[0]["log"]), ranks[0]["log"]
    assert all(r["after"] == [3.0, 3.0] for r in ranks), "the engine did not recover"


def test_a_rank_that_dies_is_named_quickly(tmp_path):
    start = time.monotonic()
    with pytest.raises(RankError) as info:
        spawn(die_after_init, 3, str(tmp_path), timeout=10, deadline=60)
    assert info.value.rank == 2
    assert time.monotonic() - start < 30
    seen = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    assert seen, "no surviving rank reported before the launcher stopped it"
    for s in seen:  # the survivors' handles failed, they did not hang
        assert "background thread" in s["error"] and s["after_s"] < 10, s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_init_from_horovodrun_environment(tmp_path):
    port = _free_port()
    timeline = tmp_path / "timeline.json"
    procs = []
    for rank in range(2):
        env = {**os.environ, "HOROVOD_RANK": str(rank), "HOROVOD_SIZE": "2",
               "HOROVOD_LOCAL_RANK": str(rank), "HOROVOD_LOCAL_SIZE": "2",
               "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "HOROVOD_CYCLE_TIME": "3.5", "HOROVOD_FUSION_THRESHOLD": "1000",
               "HOROVOD_TIMELINE": str(timeline), "OMP_NUM_THREADS": "1"}
        env.pop("HOROVOD_DRIVER_ADDR", None)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tests.backends.horovod_ranks", "env_main"], cwd=ROOT,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=60)
        finally:
            p.kill()
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    for rank, got in enumerate(outs):
        assert got["rank"] == rank and got["size"] == 2 and got["local_rank"] == rank
        assert got["local_size"] == 2 and got["cross_rank"] == 0
        assert got["sum"] == 3.0
        assert got["cycle_ms"] == 3.5
        assert got["threshold"] == effective_threshold(1000, 2) == 1024
    events = json.loads(timeline.read_text())["traceEvents"]  # rank 0's, written at shutdown
    kinds = {e.get("cat") for e in events}
    assert {"NEGOTIATE", "ALLREDUCE", "ENQUEUE"} <= kinds, kinds
    assert {e["tid"] for e in events if e["ph"] == "X"} == {0}


# -- pure functions -----------------------------------------------------------------------------

@pytest.mark.parametrize("ready, threshold, expected", [
    ([], 100, []),
    ([("a", "float32", 40), ("b", "float64", 30), ("c", "float32", 50), ("d", "float32", 20),
      ("e", "float64", 10)], 100, [["a", "c"], ["b", "e"], ["d"]]),
    ([("a", "float32", 4)] * 1 + [("b", "float32", 4), ("c", "float32", 4)], 0,
     [["a"], ["b"], ["c"]]),
    ([("a", "float32", 10), ("b", "float32", 10), ("c", "float32", 10)], 20,
     [["a", "b"], ["c"]]),
    ([("big", "float32", 500), ("a", "float32", 10), ("b", "float32", 10)], 100,
     [["big"], ["a", "b"]]),
    ([("a", "float32", 10), ("big", "float32", 500), ("b", "float32", 10)], 100,
     [["a"], ["big"], ["b"]]),  # skipped bytes overflow at once: no look-ahead past big
    ([("a", "float16", 8), ("b", "float32", 8), ("c", "float16", 8), ("d", "float32", 8)], 64,
     [["a", "c"], ["b", "d"]]),
    ([("a", "int64", 0), ("b", "int64", 0)], 0, [["a", "b"]]),  # empty tensors fit
])
def test_fuse_responses(ready, threshold, expected):
    assert fuse_responses(ready, threshold) == expected


def test_effective_threshold_rounds_like_horovod():
    assert effective_threshold(0, 4) == 0
    assert effective_threshold(1, 1) == 512
    assert effective_threshold(128 << 20, 8) == 128 << 20
    assert effective_threshold(1000, 3) == 1536


def _response(name, numel=3):
    return Response(ALLREDUCE, [name], [numel], "float32", "Sum", itemsize=4)


def test_response_cache_hits_invalidates_and_evicts_least_recently_used():
    cache = ResponseCache(capacity=2)
    req = Request("a", 0, ALLREDUCE, "float32", (3,))
    assert cache.cached(req) == MISS
    cache.put(_response("a"), {"a": (3,)})
    cache.put(_response("b"), {"b": (3,)})
    cache.update_bits()
    assert cache.cached(req) == HIT
    assert cache.cached(Request("a", 0, ALLREDUCE, "float32", (4,))) == INVALID
    assert (cache.bit("a"), cache.bit("b")) == (0, 1)  # least recently used first
    cache.get(cache.bit("a"))  # a is now the most recent
    cache.update_bits()
    assert (cache.bit("b"), cache.bit("a")) == (0, 1)
    cache.put(_response("c"), {"c": (3,)})  # full: evicts b
    cache.update_bits()
    assert cache.cached(Request("b", 0, ALLREDUCE, "float32", (3,))) == MISS
    assert len(cache) == 2
    cache.erase(cache.bit("a"))
    cache.update_bits()
    assert cache.cached(req) == MISS and cache.bit("c") == 0


@pytest.mark.parametrize("env, kwargs, needle", [
    ({"HOROVOD_CYCLE_TIME": "-1"}, {}, "HOROVOD_CYCLE_TIME"),
    ({"HOROVOD_CYCLE_TIME": "fast"}, {}, "HOROVOD_CYCLE_TIME"),
    ({"HOROVOD_FUSION_THRESHOLD": "64MB"}, {}, "HOROVOD_FUSION_THRESHOLD"),
    ({"HOROVOD_FUSION_THRESHOLD": "-5"}, {}, "HOROVOD_FUSION_THRESHOLD"),
    ({}, {"cycle_time_ms": -0.5}, "cycle time"),
    ({}, {"fusion_threshold_bytes": 1.5}, "fusion threshold"),
    ({"HOROVOD_STALL_CHECK_TIME_SECONDS": "nan"}, {}, "STALL_CHECK"),
])
def test_bad_settings_raise_one_line(env, kwargs, needle):
    with pytest.raises(ValueError, match=needle) as info:
        hvd.read_settings(env, **kwargs)
    assert "\n" not in str(info.value)


def test_settings_defaults_env_and_arguments():
    assert hvd.read_settings({}) == hvd.Settings()
    assert hvd.Settings().cycle_time_ms == 1.0
    assert hvd.Settings().fusion_threshold_bytes == 128 * 1024 * 1024
    got = hvd.read_settings({"HOROVOD_CYCLE_TIME": "3.5", "HOROVOD_FUSION_THRESHOLD": "1000"},
                            fusion_threshold_bytes=0)
    assert (got.cycle_time_ms, got.fusion_threshold_bytes) == (3.5, 0)


def test_init_with_a_bad_setting_raises_before_starting():
    with pytest.raises(ValueError, match="cycle time"):
        hvd.init(cycle_time_ms=-1)
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.rank()
