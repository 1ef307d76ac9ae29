"""Rendezvous demo: what each rank sees in a TCPStore and in new_group / new_subgroups."""

import datetime
import time

import pytest
import torch.distributed as dist

from backends.store_demo import StoreTimeout, format_report, get_or_timeout, main, run

WORLD = 3  # odd: the pairs end with a group of one


@pytest.fixture(scope="module")
def seen():
    return run(WORLD, missing_timeout_s=0.3)


def test_every_rank_reads_what_rank_0_set(seen):
    assert [s["store"]["config/lr"] for s in seen] == ["0.1"] * WORLD


def test_add_counts_arrivals_once_each(seen):
    assert sorted(s["store"]["arrival"] for s in seen) == list(range(1, WORLD + 1))
    assert all(s["store"]["arrived"] == WORLD for s in seen)


def test_compare_set_elects_one_leader_that_everyone_sees(seen):
    leaders = {s["store"]["leader"] for s in seen}
    assert len(leaders) == 1
    (leader,) = leaders
    assert int(leader) in range(WORLD)
    assert all(s["store"]["proposal_result"] == leader for s in seen)  # the first write won


def test_a_key_that_never_arrives_times_out_with_a_clear_message(seen):
    for s in seen:
        r = s["store"]["rank"]
        assert s["store"]["missing"] == (f"key 'never/{r}' did not arrive in the store within "
                                         "0.3 s (is the rank that sets it alive?)")
        assert 0.25 < s["store"]["missing_waited_s"] < 5


def test_groups_each_rank_sees(seen):
    groups = [s["groups"] for s in seen]
    assert [g["even_group_rank"] for g in groups] == [0, -1, 1]
    assert [g.get("even_sum") for g in groups] == [2.0, None, 2.0]
    assert [g["subgroup_ranks"] for g in groups] == [[0, 1], [0, 1], [2]]
    assert [g["subgroup_rank"] for g in groups] == [0, 1, 0]
    assert [g["subgroup_sum"] for g in groups] == [1.0, 1.0, 2.0]
    assert groups[0]["subgroups_by"].startswith("new_subgroups_by_enumeration")
    assert "leader" in format_report(seen)


def test_get_or_timeout_in_one_process_restores_the_stores_timeout():
    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=7))
    store.set("here", "yes")
    assert get_or_timeout(store, "here", 0.2) == b"yes"
    start = time.perf_counter()
    with pytest.raises(StoreTimeout, match=r"key 'absent' did not arrive .* within 0\.2 s"):
        get_or_timeout(store, "absent", 0.2)
    assert time.perf_counter() - start < 3
    assert store.timeout == datetime.timedelta(seconds=7)


@pytest.mark.parametrize("argv", [["--world", "0"], ["--world", "2", "--missing-timeout", "-1"]])
def test_bad_input_exits_with_status_2(argv, capsys):
    assert main(argv) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["store-demo", "--world", "17"], "invalid --world 17: must be a whole number from 1 to 16"),
    (["store-demo", "--missing-timeout", "0"], "invalid --missing-timeout 0: must be a number > 0"
     " and ≤ 30"),
    (["store-demo", "--world", "two"], "invalid --world two"),
])
def test_cli_bad_input_is_one_line_and_exit_status_2(argv, message, capsys):
    from lab.cli import main as cli_main

    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
